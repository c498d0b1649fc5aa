#include "shipper/sources/dcgm/dcgm_source.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "common/time.hpp"

using namespace jobtrail::shipper;
namespace dcgm = jobtrail::dcgm;

namespace {

// A host engine the test drives: what connect and health answer, a stall, and DCGM's callback.
struct Engine {
    std::mutex mu;
    std::condition_variable cv;
    bool up = true;
    bool stuck = false;   // every call waits until this is false again
    int fail_health = 0;  // the next N health calls fail (a host engine restart)
    std::vector<dcgm::Gpu> gpus = {{0, "00000000:1B:00.0", ""}, {3, "00000000:3B:00.0", ""}};
    std::vector<dcgm::Incident> incidents;
    std::function<void(dcgm::Event)> sink;
    int connects = 0, registrations = 0, checks = 0, calls = 0;

    void wait_unstuck(std::unique_lock<std::mutex>& lk) {
        ++calls;
        cv.notify_all();
        cv.wait(lk, [this] { return !stuck; });
    }
    void set(const std::function<void(Engine&)>& f) {
        std::lock_guard<std::mutex> lk(mu);
        f(*this);
        cv.notify_all();
    }
    template <class P>
    bool until(P pred) {
        std::unique_lock<std::mutex> lk(mu);
        return cv.wait_for(lk, std::chrono::seconds(10), [&] { return pred(*this); });
    }
    // DCGM's thread calling back (the test's thread stands in for it).
    void violation(dcgm::Event e) {
        std::function<void(dcgm::Event)> s;
        {
            std::lock_guard<std::mutex> lk(mu);
            s = sink;
        }
        REQUIRE(s);
        s(std::move(e));
    }
};

class FakeClient final : public dcgm::Client {
public:
    explicit FakeClient(std::shared_ptr<Engine> e) : e_(std::move(e)) {}
    bool connect(std::string& error) override {
        std::unique_lock<std::mutex> lk(e_->mu);
        e_->wait_unstuck(lk);
        if (!e_->up) {
            error = "libdcgm.so.4, libdcgm.so.3: not found";
            return false;
        }
        ++e_->connects;
        return true;
    }
    std::string library() const override { return "libdcgm.so.4"; }
    std::vector<dcgm::Gpu> gpus(std::string&) override {
        std::unique_lock<std::mutex> lk(e_->mu);
        e_->wait_unstuck(lk);
        return e_->gpus;
    }
    bool watch_violations(std::function<void(dcgm::Event)> sink, std::string&) override {
        std::unique_lock<std::mutex> lk(e_->mu);
        e_->wait_unstuck(lk);
        e_->sink = std::move(sink);
        ++e_->registrations;
        return true;
    }
    std::optional<std::vector<dcgm::Incident>> health(std::string& error) override {
        std::unique_lock<std::mutex> lk(e_->mu);
        e_->wait_unstuck(lk);
        ++e_->checks;
        if (e_->fail_health > 0) {
            --e_->fail_health;
            error = "dcgmHealthCheck: DCGM_ST_CONNECTION_NOT_VALID";
            return std::nullopt;
        }
        return e_->incidents;
    }
    void disconnect() override {
        std::lock_guard<std::mutex> lk(e_->mu);
        e_->sink = nullptr;
    }

private:
    std::shared_ptr<Engine> e_;
};

struct Notices {
    std::mutex mu;
    std::vector<InternalEvent> all;
    Events events() {
        return Events([this](const InternalEvent& e) {
            std::lock_guard<std::mutex> lk(mu);
            all.push_back(e);
        });
    }
    size_t count(std::string_view name) {
        std::lock_guard<std::mutex> lk(mu);
        size_t n = 0;
        for (const auto& e : all) n += e.name == name;
        return n;
    }
    std::string last(std::string_view name) {
        std::lock_guard<std::mutex> lk(mu);
        for (auto it = all.rbegin(); it != all.rend(); ++it)
            if (it->name == name) return it->message;
        return {};
    }
};

struct Rig {
    std::shared_ptr<Engine> engine = std::make_shared<Engine>();
    Metrics m;
    Notices notices;
    DcgmConfig cfg;
    std::unique_ptr<DcgmSource> src;
    std::vector<Event> out;

    explicit Rig(int queue_size = 4096) {
        cfg.enabled = true;
        cfg.queue_size = queue_size;
        cfg.client.call_timeout_ms = 100;
    }
    dcgm_source::WorkerTiming timing{10, 5, 20};
    void start(const nlohmann::json& restored = nlohmann::json::object()) {
        src = std::make_unique<DcgmSource>(cfg, NodeInfo{"c1", "n1"}, m, notices.events(),
                                           std::make_shared<FakeClient>(engine), timing);
        src->restore(restored);
    }
    // Polls like the pipeline until `pred` holds on what was read (10 s at most).
    template <class P>
    bool poll_until(P pred) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (std::chrono::steady_clock::now() < deadline) {
            while (src->poll(out, 1 << 20)) {
            }
            if (pred()) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        return false;
    }
    // Waits for n more health checks, then takes what they found.
    void poll_checks(int n) {
        int seen = 0;
        engine->set([&](Engine& e) { seen = e.checks; });
        REQUIRE(engine->until([&](Engine& e) { return e.checks >= seen + n; }));
        while (src->poll(out, 1 << 20)) {
        }
    }
    DcgmMetrics& dm() { return m.group<DcgmMetrics>(); }
};

std::string meta(const Event& e, const std::string& key) {
    for (const auto& [k, v] : e.metadata)
        if (k == key) return v;
    return "-";
}

// DCGM's time of a violation a few seconds old, as it calls back: µs since the epoch.
int64_t recent_us(int64_t offset_us = 0) {
    return jobtrail::realtime_ns() / 1000 - 5'000'000 + offset_us;
}

dcgm::Event xid(unsigned gpu, int64_t ts_us, int64_t code) {
    dcgm::Event e;
    e.kind = dcgm::Kind::kXid;
    e.gpu = gpu;
    e.ts_us = ts_us;
    e.value = code;
    return e;
}

}  // namespace

TEST_CASE("dcgm source: a violation is a line in {job=dcgm} at DCGM's time, with the GPU's bus id", "[shipper][dcgm]") {
    Rig r;
    r.start();
    REQUIRE(r.poll_until([&] { return r.dm().connected.value() == 1; }));
    CHECK(r.notices.last(event::kDcgmConnected).find("libdcgm.so.4: 2 GPUs (0 00000000:1B:00.0, 3 00000000:3B:00.0)") !=
          std::string::npos);
    r.out.clear();
    // The same event twice at one microsecond: a nanosecond apart, so Loki keeps both.
    const int64_t t = recent_us();
    r.engine->violation(xid(3, t, 79));
    r.engine->violation(xid(3, t, 79));
    REQUIRE(r.poll_until([&] { return r.out.size() == 2; }));
    const Event& e = r.out[0];
    CHECK(e.line == "XID 79 on GPU 3");
    CHECK(e.ts_ns == t * 1000);
    CHECK(r.out[1].ts_ns == e.ts_ns + 1);
    CHECK(e.labels() ==
          jobtrail::loki::LabelSet{{"cluster", "c1"}, {"node", "n1"}, {"job", "dcgm"}, {"service_name", "dcgm"}});
    CHECK(e.origin->kind == jobtrail::node::StreamKind::kDcgm);
    CHECK(e.pci_bdf == "00000000:3B:00.0");
    CHECK(meta(e, "gpu") == "3");
    CHECK(meta(e, "pci_bdf") == "00000000:3B:00.0");
    CHECK(meta(e, "event") == "xid");
    CHECK(meta(e, "xid") == "79");
    CHECK(meta(e, "severity") == "fatal");  // the kernel rule's verdict on Xid 79
    CHECK(r.dm().events.value() == 2);
}

TEST_CASE("dcgm source: a GPU DCGM cannot describe is watched, said once, and its events carry no bus id",
          "[shipper][dcgm]") {
    Rig r;
    r.engine->gpus = {{0, "00000000:1B:00.0", ""}, {3, "", "dcgmGetDeviceAttributes(3): GPU is lost (-18)"}};
    r.start();
    REQUIRE(r.poll_until([&] { return r.dm().connected.value() == 1; }));
    CHECK(r.notices.last(event::kDcgmConnected).find("2 GPUs (0 00000000:1B:00.0, 3 (no bus id))") !=
          std::string::npos);
    CHECK(r.notices.count(event::kDcgmGpuUndescribed) == 1);
    CHECK(r.notices.last(event::kDcgmGpuUndescribed) ==
          "DCGM could not describe every GPU (dcgmGetDeviceAttributes(3): GPU is lost (-18)): their events are "
          "shipped without a PCI address, so they name no job's GPU and go to the node's running jobs");
    r.out.clear();
    r.engine->violation(xid(3, recent_us(), 79));
    REQUIRE(r.poll_until([&] { return r.out.size() == 1; }));
    CHECK(r.out[0].line == "XID 79 on GPU 3");
    CHECK(r.out[0].pci_bdf.empty());
    CHECK(meta(r.out[0], "pci_bdf") == "-");  // no key rather than an empty one
    CHECK(meta(r.out[0], "severity") == "fatal");
}

TEST_CASE("dcgm source: a full queue drops and counts, never waits, and says so once a minute", "[shipper][dcgm]") {
    Rig r(16);
    r.start();
    REQUIRE(r.poll_until([&] { return r.dm().connected.value() == 1; }));
    r.out.clear();
    // The pipeline does not poll meanwhile (its lane full): DCGM's calls all return at once.
    const int64_t t = recent_us();
    for (int i = 0; i < 1000; ++i) r.engine->violation(xid(0, t + i, 13));
    REQUIRE(r.poll_until([&] { return r.out.size() == 16; }));
    CHECK(r.out.front().line == "XID 13 on GPU 0");
    CHECK(r.out.front().ts_ns == t * 1000);  // the oldest are kept
    CHECK(r.dm().queue_drops.value() == 984);
    CHECK(r.notices.count(event::kDcgmQueueFull) == 1);
    CHECK(r.notices.last(event::kDcgmQueueFull).starts_with("984 DCGM violations dropped"));
    // More drops within the minute: counted, not said again.
    for (int i = 0; i < 20; ++i) r.engine->violation(xid(0, t + 1'000'000 + i, 13));
    REQUIRE(r.poll_until([&] { return r.out.size() == 32; }));
    CHECK(r.dm().queue_drops.value() == 988);
    CHECK(r.notices.count(event::kDcgmQueueFull) == 1);
}

TEST_CASE("dcgm source: a health incident is a line when it appears and when it clears, not on every check",
          "[shipper][dcgm]") {
    Rig r;
    r.engine->incidents = {{3, "DCGM_FR_VOLATILE_DBE_DETECTED", "mem", "fail", "Detected 2 volatile DBEs on GPU 3."}};
    r.start();
    REQUIRE(r.poll_until([&] { return r.out.size() == 1; }));
    CHECK(r.out[0].line == "DCGM_FR_VOLATILE_DBE_DETECTED on GPU 3 (mem, fail): Detected 2 volatile DBEs on GPU 3.");
    CHECK(r.out[0].pci_bdf == "00000000:3B:00.0");
    CHECK(meta(r.out[0], "event") == "health");
    CHECK(meta(r.out[0], "severity") == "error");
    // Checks go on, its message's reading changes: still one line.
    r.engine->set([](Engine& e) { e.incidents[0].message = "Detected 3 volatile DBEs on GPU 3."; });
    r.poll_checks(3);
    CHECK(r.out.size() == 1);
    // Its verdict changes: a line; it goes: one "cleared" line.
    r.engine->set([](Engine& e) { e.incidents[0].health = "warn"; });
    r.poll_checks(2);
    REQUIRE(r.out.size() == 2);
    CHECK(r.out[1].line.starts_with("DCGM_FR_VOLATILE_DBE_DETECTED on GPU 3 (mem, warn)"));
    r.engine->set([](Engine& e) { e.incidents.clear(); });
    r.poll_checks(3);
    REQUIRE(r.out.size() == 3);
    CHECK(r.out[2].line == "DCGM_FR_VOLATILE_DBE_DETECTED on GPU 3 (mem) cleared");
    CHECK(meta(r.out[2], "severity") == "info");
    CHECK(r.src->checkpoint()["incidents"].empty());
}

TEST_CASE("dcgm source: after a restart, an incident still active is not repeated, one cleared meanwhile is said",
          "[shipper][dcgm]") {
    nlohmann::json saved;
    int64_t first_run_watching = 0;
    {
        Rig r;
        r.engine->incidents = {{0, "DCGM_FR_PCI_REPLAY_RATE", "pcie", "warn", "replays"},
                               {3, "DCGM_FR_VOLATILE_DBE_DETECTED", "mem", "fail", "DBE"}};
        r.start();
        REQUIRE(r.poll_until([&] { return r.out.size() == 2; }));
        saved = r.src->checkpoint();
        first_run_watching = saved["watching_us"].get<int64_t>();
        CHECK(saved["incidents"].size() == 2);
    }
    // The checkpoint as the pipeline writes it (through text).
    saved = nlohmann::json::parse(saved.dump());
    Rig r;
    r.engine->incidents = {{3, "DCGM_FR_VOLATILE_DBE_DETECTED", "mem", "fail", "DBE"}};  // GPU 0's went
    r.start(saved);
    REQUIRE(r.poll_until([&] { return !r.out.empty(); }));
    r.poll_checks(2);
    REQUIRE(r.out.size() == 1);
    CHECK(r.out[0].line == "DCGM_FR_PCI_REPLAY_RATE on GPU 0 (pcie) cleared");
    CHECK(r.out[0].pci_bdf == "00000000:1B:00.0");
    // The violations of the gap are not replayed: said, with both times.
    const std::string said = r.notices.last(event::kDcgmNotReplayed);
    CHECK(said.find(jobtrail::format_rfc3339_ns(first_run_watching * 1000)) != std::string::npos);
    CHECK(said.find("not replayed by DCGM") != std::string::npos);
    CHECK(r.notices.count(event::kDcgmNotReplayed) == 1);
}

TEST_CASE("dcgm source: a failed health call is a lost connection: reconnect and register again", "[shipper][dcgm]") {
    Rig r;
    r.engine->incidents = {{3, "DCGM_FR_VOLATILE_DBE_DETECTED", "mem", "fail", "DBE"}};
    r.start();
    REQUIRE(r.poll_until([&] { return r.out.size() == 1; }));
    // The host engine restarts: a health call fails, and the first reconnection too.
    r.engine->set([](Engine& e) {
        e.fail_health = 1;
        e.up = false;
    });
    REQUIRE(r.poll_until([&] { return r.notices.count(event::kDcgmLost) == 1; }));
    CHECK(r.dm().connected.value() == 0);
    REQUIRE(r.poll_until([&] { return r.dm().connect_failures.value() >= 2; }));
    r.engine->set([](Engine& e) { e.up = true; });
    REQUIRE(r.poll_until([&] { return r.dm().connected.value() == 1; }));
    CHECK(r.engine->registrations == 2);
    // Said once: the loss; the failed reconnections only counted; the gap in violations said.
    CHECK(r.notices.count(event::kDcgmUnavailable) == 0);
    CHECK(r.notices.count(event::kDcgmNotReplayed) == 1);
    r.poll_checks(2);
    CHECK(r.out.size() == 1);  // the incident DCGM still reports: not shipped twice
    // Violations reach the source through the new registration.
    r.engine->violation(xid(3, recent_us(), 79));
    REQUIRE(r.poll_until([&] { return r.out.size() == 2; }));
}

TEST_CASE("dcgm source: no library is one notice and a counter, then it connects when it can", "[shipper][dcgm]") {
    Rig r;
    r.engine->up = false;
    r.start();
    REQUIRE(r.poll_until([&] { return r.dm().connect_failures.value() >= 3; }));
    CHECK(r.notices.count(event::kDcgmUnavailable) == 1);
    CHECK(r.notices.last(event::kDcgmUnavailable).find("libdcgm.so.4, libdcgm.so.3: not found") != std::string::npos);
    CHECK(r.dm().connected.value() == 0);
    CHECK(r.out.empty());
    r.engine->set([](Engine& e) { e.up = true; });
    REQUIRE(r.poll_until([&] { return r.dm().connected.value() == 1; }));
    CHECK(r.notices.count(event::kDcgmConnected) == 1);
    CHECK(r.notices.count(event::kDcgmNotReplayed) == 0);  // it never watched: no gap to speak of
}

TEST_CASE("dcgm source: a host engine that never answers blocks neither poll nor the source's end", "[shipper][dcgm]") {
    Rig r;
    r.engine->stuck = true;
    r.start();
    std::vector<Event> out;
    CHECK_FALSE(r.src->poll(out, 1 << 20));  // returns, with nothing, while connect hangs
    REQUIRE(r.engine->until([](Engine& e) { return e.calls >= 1; }));
    CHECK_FALSE(r.src->poll(out, 1 << 20));
    CHECK(out.empty());
    CHECK(r.src->checkpoint()["incidents"].empty());
    // The shipper stops: the source goes though the call never returns (its thread is left to it).
    r.src.reset();
    r.engine->set([](Engine& e) { e.stuck = false; });
}

TEST_CASE("dcgm source: a DCGM time Loki would refuse (none, 1970, far ahead, the end of time) is the arrival time",
          "[shipper][dcgm]") {
    Rig r;
    r.start();
    REQUIRE(r.poll_until([&] { return r.dm().connected.value() == 1; }));
    r.out.clear();
    const int64_t before_us = jobtrail::realtime_ns() / 1000;
    const int64_t recent = before_us - 5'000'000;  // 5 s ago: DCGM's own time, kept
    const std::vector<int64_t> stamps = {
        0, -7, 1, before_us - int64_t{8} * 86'400'000'000, before_us + 86'400'000'000, INT64_MAX, recent};
    for (const int64_t ts : stamps) r.engine->violation(xid(3, ts, 79));
    REQUIRE(r.poll_until([&] { return r.out.size() == 7; }));
    const int64_t after_ns = jobtrail::realtime_ns();
    for (size_t i = 0; i + 1 < r.out.size(); ++i) {
        INFO("event " << i << " at " << r.out[i].ts_ns);
        CHECK(r.out[i].ts_ns >= before_us * 1000);
        CHECK(r.out[i].ts_ns <= after_ns + 10);
        CHECK(r.out[i].line == "XID 79 on GPU 3");
    }
    CHECK(r.out.back().ts_ns == recent * 1000);
}

TEST_CASE("dcgm source: a host engine that takes connections but fails every health check is retried with backoff",
          "[shipper][dcgm]") {
    Rig r;
    r.timing = {10, 100, 200};
    // DCGM answers the connection and registration, then refuses the health check (a health
    // response version it does not take, health watches not supported): the same every time.
    r.engine->fail_health = 1'000'000;
    r.start();
    REQUIRE(r.poll_until([&] { return r.notices.count(event::kDcgmLost) >= 1; }));
    std::this_thread::sleep_for(std::chrono::seconds(1));
    while (r.src->poll(r.out, 1 << 20)) {
    }
    int connects = 0;
    r.engine->set([&](Engine& e) { connects = e.connects; });
    // At most one attempt per 100..200 ms, not one after another: a busy loop on the node made
    // thousands, each with its notices on the shipper's own stream.
    INFO("connects in 1 s: " << connects);
    CHECK(connects <= 12);
    CHECK(r.notices.count(event::kDcgmLost) <= 12);
    // Once it answers, the checks run at their interval again.
    r.engine->set([](Engine& e) { e.fail_health = 0; });
    r.poll_checks(3);
}

TEST_CASE("dcgm source: a host engine whose health check fails is let go while the shipper waits to retry",
          "[shipper][dcgm]") {
    Rig r;
    r.timing = {10, 60'000, 60'000};  // the retry is a minute away: the test looks inside the wait
    r.engine->fail_health = 1;
    r.start();
    REQUIRE(r.poll_until([&] { return r.notices.count(event::kDcgmLost) == 1; }));
    // The shipper has said DCGM is lost and that violations are not watched: the connection and
    // its registration are closed, not left for the host engine to call into during the gap.
    bool registered = true;
    int registrations = 0;
    r.engine->set([&](Engine& e) {
        registered = static_cast<bool>(e.sink);
        registrations = e.registrations;
    });
    CHECK(registrations == 1);
    CHECK_FALSE(registered);
}

TEST_CASE("dcgm source: the connected notice lists 16 GPUs, and past 16 counts the rest", "[shipper][dcgm]") {
    const size_t n = GENERATE(16, 17);
    INFO(n << " GPUs");
    Rig r;
    r.engine->gpus.clear();
    for (unsigned i = 0; i < n; ++i) {
        char bdf[32];
        std::snprintf(bdf, sizeof bdf, "00000000:%02X:00.0", i + 1);
        r.engine->gpus.push_back({i, bdf, ""});
    }
    r.start();
    REQUIRE(r.poll_until([&] { return r.dm().connected.value() == 1; }));
    const std::string notice = r.notices.last(event::kDcgmConnected);
    INFO(notice);
    CHECK(notice.find(std::to_string(n) + " GPUs (0 00000000:01:00.0, ") != std::string::npos);
    CHECK(notice.find("15 00000000:10:00.0") != std::string::npos);  // the 16th
    CHECK(notice.find("16 00000000:11:00.0") == std::string::npos);  // the 17th: counted, not listed
    if (n == 16)
        CHECK(notice.find("15 00000000:10:00.0)") != std::string::npos);
    else
        CHECK(notice.find("15 00000000:10:00.0 and 1 more)") != std::string::npos);
}

TEST_CASE("dcgm source: its end lets go of DCGM before it returns", "[shipper][dcgm]") {
    Rig r;
    r.cfg.client.call_timeout_ms = 5000;  // the end waits up to 11 s for the worker: ample on a loaded machine
    r.start();
    REQUIRE(r.poll_until([&] { return r.dm().connected.value() == 1; }));
    r.src.reset();  // the shipper stops
    bool registered = true;
    r.engine->set([&](Engine& e) { registered = static_cast<bool>(e.sink); });
    CHECK_FALSE(registered);  // disconnected: no violation reaches a source that is gone
}

TEST_CASE("dcgm source: no time DCGM last answered is kept before it ever answered", "[shipper][dcgm]") {
    Rig r;
    r.engine->up = false;
    r.start();
    REQUIRE(r.poll_until([&] { return r.dm().connect_failures.value() >= 1; }));
    const auto saved = r.src->checkpoint();
    CHECK_FALSE(saved.contains("watching_us"));
    CHECK(saved["incidents"].empty());
}

TEST_CASE("dcgm source: a GPU the host engine no longer lists after a reconnection has no bus id", "[shipper][dcgm]") {
    // Its events name no job's GPU, rather than that of the GPU that had its id before.
    Rig r;
    r.start();
    REQUIRE(r.poll_until([&] { return r.dm().connected.value() == 1; }));
    r.engine->set([](Engine& e) {
        e.gpus = {{0, "00000000:1B:00.0", ""}};
        e.fail_health = 1;
    });
    REQUIRE(r.poll_until([&] { return r.notices.count(event::kDcgmConnected) == 2; }));
    CHECK(r.notices.last(event::kDcgmConnected).find("1 GPUs (0 00000000:1B:00.0)") != std::string::npos);
    r.out.clear();
    r.engine->violation(xid(3, recent_us(), 79));
    r.engine->violation(xid(0, recent_us(), 79));
    REQUIRE(r.poll_until([&] { return r.out.size() == 2; }));
    CHECK(r.out[0].line == "XID 79 on GPU 3");
    CHECK(r.out[0].pci_bdf.empty());
    CHECK(r.out[1].pci_bdf == "00000000:1B:00.0");
}

TEST_CASE("dcgm source: the undescribed GPUs notice says their reasons up to 4096 bytes", "[shipper][dcgm]") {
    // Six reasons of 681 bytes and their five "; " are 4096 bytes: a seventh is left out.
    Rig r;
    const auto reason = [](unsigned gpu) {
        std::string s = "dcgmGetDeviceAttributes(" + std::to_string(gpu) + "): ";
        return s + std::string(681 - s.size(), 'x');
    };
    r.engine->gpus = {{0, "", reason(0)}, {1, "00000000:1B:00.0", ""}};
    for (unsigned g = 2; g <= 6; ++g) r.engine->gpus.push_back({g, "", reason(g)});
    r.engine->gpus.push_back({7, "", "the seventh"});
    r.start();
    REQUIRE(r.poll_until([&] { return r.dm().connected.value() == 1; }));
    std::string expected = reason(0);
    for (unsigned g = 2; g <= 6; ++g) expected += "; " + reason(g);
    REQUIRE(expected.size() == 4096);
    CHECK(r.notices.count(event::kDcgmGpuUndescribed) == 1);
    CHECK(r.notices.last(event::kDcgmGpuUndescribed) ==
          "DCGM could not describe every GPU (" + expected +
              "): their events are shipped without a PCI address, so they name no job's GPU and go to the node's "
              "running jobs");
}

TEST_CASE("dcgm source: a poll ships violations until their bytes reach its budget", "[shipper][dcgm]") {
    // Each counts its line and 128 bytes for its metadata: "XID 79 on GPU 3" is 143.
    Rig r;
    r.start();
    REQUIRE(r.poll_until([&] { return r.dm().connected.value() == 1; }));
    while (r.src->poll(r.out, 1 << 20)) {
    }
    r.out.clear();
    const int64_t t = recent_us();
    for (int i = 0; i < 6; ++i) r.engine->violation(xid(3, t + i, 79));
    std::vector<Event> out;
    CHECK(r.src->poll(out, 286));  // two reach it exactly: more are left
    CHECK(out.size() == 2);
    CHECK(r.src->poll(out, 287));  // two are 1 byte short of it: a third
    CHECK(out.size() == 5);
    CHECK_FALSE(r.src->poll(out, 1));  // the last one
    REQUIRE(out.size() == 6);
    for (size_t i = 0; i < out.size(); ++i) CHECK(out[i].ts_ns == (t + static_cast<int64_t>(i)) * 1000);
}
