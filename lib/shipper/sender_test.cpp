#include "shipper/sender.hpp"

#include <snappy.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "common/fs.hpp"
#include "common/time.hpp"
#include "push.pb.h"
#include "shipper/lane_metrics.hpp"
#include "spool_frames.hpp"
#include "temp_dir.hpp"

using namespace jobtrail;
using jobtrail::loki::HttpResult;

namespace {

// One request as Loki would read it (decoded with libprotobuf, not with our encoder).
struct Request {
    std::vector<std::string> streams;
    std::vector<std::string> lines;
    uint64_t bytes = 0;   // line bytes
    size_t metadata = 0;  // structured metadata pairs
};

Request decode(std::string_view body) {
    std::string raw;
    REQUIRE(snappy::Uncompress(body.data(), body.size(), &raw));
    logproto::PushRequest pr;
    REQUIRE(pr.ParseFromString(raw));
    Request r;
    for (const auto& s : pr.streams()) {
        r.streams.push_back(s.labels());
        for (const auto& e : s.entries()) {
            r.lines.push_back(e.line());
            r.bytes += e.line().size();
            r.metadata += static_cast<size_t>(e.structuredmetadata_size());
        }
    }
    return r;
}

// Loki, scripted: `answer` sees each request and says what Loki replies.
struct Script {
    std::mutex mu;
    std::function<HttpResult(const Request&)> answer;
    std::vector<Request> seen;
    std::vector<std::string> stored;  // lines of the requests answered 2xx
};

class ScriptedTransport : public loki::PushTransport {
public:
    explicit ScriptedTransport(Script& s) : s_(s) {}
    HttpResult push(std::string_view body) override {
        const Request r = decode(body);
        std::lock_guard<std::mutex> lk(s_.mu);
        s_.seen.push_back(r);
        HttpResult res = s_.answer(r);
        if (res.status / 100 == 2) s_.stored.insert(s_.stored.end(), r.lines.begin(), r.lines.end());
        return res;
    }

private:
    Script& s_;
};

struct Rig {
    test::TempDir dir;
    spool::Spool spool;
    config::ShipperConfig cfg = config::default_shipper_config();
    shipper::Metrics m;
    Script script;
    std::vector<std::string> log;
    std::mutex log_mu;
    std::unique_ptr<shipper::Sender> sender;
    std::atomic<bool> stop{false};
    std::thread thread;
    int64_t reprobe_ns = 0;  // 0: the sender's own

    Rig() {
        REQUIRE(spool.open({dir.path() + "/spool"}));
        cfg.min_backoff_ms = 10;
        cfg.max_backoff_ms = 100;
        cfg.batch_wait_ms = 20;
        cfg.batch_max_bytes = 256 << 10;
        cfg.max_stream_rate = 0;  // Loki's answers are under test here; pacing has its own case
    }
    ~Rig() {
        stop = true;
        if (thread.joinable()) thread.join();
    }
    void add(const std::string& stream, const std::string& line, int64_t ts) {
        REQUIRE(spool.append(spool::Record{ts, stream, line, {}}) == spool::Spool::Append::kOk);
    }
    void start() {
        REQUIRE(spool.sync());
        sender = std::make_unique<shipper::Sender>(
            cfg, spool, m, shipper::Events([this](const shipper::InternalEvent& e) {
                std::lock_guard<std::mutex> lk(log_mu);
                log.push_back(std::string(shipper::severity_name(e.severity)) + ": " + e.message);
            }),
            [this] { return std::make_unique<ScriptedTransport>(script); });
        if (reprobe_ns) sender->set_reprobe_after(reprobe_ns);
        thread = std::thread([this] { sender->run(stop); });
    }
    // A Loki that takes everything: the sender started, and waited for until Loki holds n lines
    // and the spool is all acknowledged.
    void ship_all(size_t n);
    // Waits (up to a minute: a bound on a hang, not a performance figure) for pred.
    bool wait_for(const std::function<bool()>& pred) {
        for (int i = 0; i < 6000; ++i) {
            {
                std::lock_guard<std::mutex> lk(script.mu);
                if (pred()) return true;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return false;
    }
    size_t stored_with(std::string_view prefix) {
        std::lock_guard<std::mutex> lk(script.mu);
        return stored_with_locked(prefix);
    }
    size_t stored_with_locked(std::string_view prefix) {
        return static_cast<size_t>(std::count_if(script.stored.begin(), script.stored.end(),
                                                 [&](const std::string& l) { return l.rfind(prefix, 0) == 0; }));
    }
};

const std::string kA = "{job=\"a\", service_name=\"a\"}";
const std::string kB = "{job=\"b\", service_name=\"b\"}";

HttpResult ok() {
    return {204, "", "", false};
}

void Rig::ship_all(size_t n) {
    script.answer = [](const Request&) { return ok(); };
    start();
    REQUIRE(wait_for([&] { return script.stored.size() == n; }));
    REQUIRE(wait_for([&] { return spool.pending_bytes() == 0; }));
}

// Loki 3.4's per-stream 429 for the first entry lines of a request (reference §1), naming
// `limit` (§12: "8EB" right after a restart).
HttpResult per_stream_429(const Request& r, const std::string& limit = "64KB") {
    std::string body;
    for (size_t i = 0; i < std::min<size_t>(10, r.lines.size()); ++i)
        body +=
            "entry with timestamp 2026-12-01 08:23:14.337153088 +0000 UTC ignored, reason: 'Per stream rate limit "
            "exceeded (limit: " +
            limit + "/sec) while attempting to ingest for stream '" + r.streams[0] +
            "' totaling 1000B, consider splitting a stream via additional labels or contact your Loki "
            "administrator to see if the limit can be increased',\n";
    body += "user 'fake', total ignored: " + std::to_string(r.lines.size()) + " out of " +
            std::to_string(r.lines.size()) + " for stream: " + r.streams[0] + "\n";
    return {429, body, "", false};
}

}  // namespace

TEST_CASE("sender: each push carries one stream, and everything is acknowledged", "[loki][sender]") {
    Rig rig;
    const int64_t t = realtime_ns();
    // Interleaved line by line: two streams whose labels are as long as each other's.
    for (int i = 0; i < 300; ++i) rig.add(i % 3 ? kA : kB, "line " + std::to_string(i), t + i);
    rig.ship_all(300);
    std::lock_guard<std::mutex> lk(rig.script.mu);
    for (const auto& r : rig.script.seen) {
        REQUIRE(r.streams.size() == 1);
        // Each line under its own stream's labels.
        for (const auto& l : r.lines) CHECK(r.streams[0] == (std::stoi(l.substr(5)) % 3 ? kA : kB));
    }
    const auto& m = rig.m.group<shipper::SenderMetrics>();
    CHECK(m.sent == 300);
    // The node lane's sender says when Loki last took its lines; the jobs lane's is its own.
    CHECK(m.last_success > 0);
    CHECK(m.lane_last_success.value({"node"}) == m.last_success);
    CHECK(m.lane_last_success.value({"jobs"}) == 0);
}

TEST_CASE("sender: streams sent and acknowledged leave no state behind, however many jobs had one", "[loki][sender]") {
    Rig rig;
    const int64_t t = realtime_ns();
    // A node sees a new NCCL stream per job, for months: here 50 jobs' streams of one line each.
    for (int i = 0; i < 50; ++i) rig.add("{job=\"j" + std::to_string(i) + "\", service_name=\"j\"}", "line", t + i);
    rig.ship_all(50);
    // One more line read after all 50 were settled: the sender has gone round since.
    rig.add(kA, "later", realtime_ns());
    REQUIRE(rig.spool.sync());
    REQUIRE(rig.wait_for([&] { return rig.script.stored.size() == 51; }));
    // At most the last line's stream (read while it runs: a stopped sender forgets them all).
    CHECK(rig.wait_for([&] { return rig.sender->tracked_streams() <= 1; }));
}

TEST_CASE("sender: a record committed to an idle spool goes out at once, not after batch.max_wait", "[loki][sender]") {
    Rig rig;
    rig.cfg.batch_wait_ms = 60'000;  // the longest max_wait the config allows
    rig.script.answer = [](const Request&) { return ok(); };
    rig.start();  // nothing to read: the sender waits
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const auto t0 = std::chrono::steady_clock::now();
    rig.add(kA, "first line of the run", realtime_ns());
    REQUIRE(rig.spool.sync());
    // Stored well inside the minute it would otherwise sleep (a bound on a hang, not a figure).
    REQUIRE(rig.wait_for([&] { return rig.script.stored.size() == 1; }));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
}

TEST_CASE("sender: a per-stream 429 splits that stream below the named limit, the other stream is not held",
          "[loki][sender]") {
    Rig rig;
    const int64_t t = realtime_ns();
    // A: 100 KB at once, over a 64 KB burst; B: a trickle written after it.
    for (int i = 0; i < 100; ++i) rig.add(kA, "a " + std::to_string(i) + " " + std::string(1000, 'a'), t + i);
    for (int i = 0; i < 5; ++i) rig.add(kB, "b " + std::to_string(i), t + 200 + i);
    rig.script.answer = [](const Request& r) {
        if (r.streams[0] == kA && r.bytes > 64 * 1024) return per_stream_429(r);
        return ok();
    };
    rig.start();
    REQUIRE(rig.wait_for([&] { return rig.script.stored.size() == 105; }));
    REQUIRE(rig.wait_for([&] { return rig.spool.pending_bytes() == 0; }));
    std::lock_guard<std::mutex> lk(rig.script.mu);
    CHECK(rig.m.group<shipper::SenderMetrics>().stream_rate_limit() == 64 * 1024);
    CHECK(rig.m.group<shipper::SenderMetrics>().sent == 105);
    // B's lines were stored before A's last (A was still being paced).
    const auto last_a = std::find_if(rig.script.stored.rbegin(), rig.script.stored.rend(),
                                     [](const std::string& l) { return l.rfind("a ", 0) == 0; });
    const auto first_b = std::find(rig.script.stored.begin(), rig.script.stored.end(), "b 0");
    CHECK(first_b - rig.script.stored.begin() < rig.script.stored.rend() - last_a - 1);
    CHECK(rig.m.group<shipper::SenderMetrics>().rejected.empty());
}

TEST_CASE("sender: a 429 for the tenant's whole push splits the batch below the named rate", "[loki][sender]") {
    Rig rig;
    rig.cfg.batch_max_bytes = 1 << 20;
    const int64_t t = realtime_ns();
    for (int i = 0; i < 400; ++i) rig.add(kA, std::to_string(i) + std::string(1000, 'x'), t + i);
    rig.script.answer = [](const Request& r) -> HttpResult {
        if (r.bytes > 200'000)
            return {
                429,
                "Ingestion rate limit exceeded for user fake (limit: 262144 bytes/sec) while attempting to ingest '" +
                    std::to_string(r.lines.size()) + "' lines totaling '" + std::to_string(r.bytes) +
                    "' bytes, reduce log volume or contact your Loki administrator to see if the limit can be "
                    "increased\n",
                "", false};
        return ok();
    };
    rig.start();
    REQUIRE(rig.wait_for([&] { return rig.script.stored.size() == 400; }));
    REQUIRE(rig.wait_for([&] { return rig.spool.pending_bytes() == 0; }));  // counted, then settled
    CHECK(rig.m.group<shipper::SenderMetrics>().tenant_rate_limit() == 262144);
    CHECK(rig.m.group<shipper::SenderMetrics>().sent == 400);
}

TEST_CASE("sender: Loki 3 grouped and capped bodies are counted entry by entry", "[loki][sender]") {
    Rig rig;
    const int64_t t = realtime_ns();
    // 13 entries, 6 of them 3000 B (reference §3), in stream A; 33 in stream B, 30 of them too
    // far behind (reference §5: 10 listed, then the trailer).
    for (int i = 0; i < 13; ++i) rig.add(kA, i % 2 ? std::string(3000, 'L') : "short " + std::to_string(i), t + i);
    for (int i = 0; i < 33; ++i) rig.add(kB, "b " + std::to_string(i), t + 100 + i);
    rig.script.answer = [](const Request& r) -> HttpResult {
        if (r.streams[0] == kA)
            return {400,
                    "6 errors like: Max entry size '2048' bytes exceeded for stream '" + r.streams[0] +
                        "' while adding an entry with length '3000' bytes\n",
                    "", false};
        std::string body;
        for (int i = 0; i < 10; ++i)
            body +=
                "entry with timestamp 2026-12-01 06:24:01.635651333 +0000 UTC ignored, reason: 'entry too far "
                "behind, entry timestamp is: 2026-12-01T06:24:01Z, oldest acceptable timestamp is: "
                "2026-12-01T07:24:01Z',\n";
        return {400, body + "user 'fake', total ignored: 30 out of 33 for stream: " + r.streams[0] + "\n", "", false};
    };
    rig.start();
    REQUIRE(rig.wait_for([&] { return rig.spool.pending_bytes() == 0; }));
    CHECK(rig.m.group<shipper::SenderMetrics>().sent == 7 + 3);
    uint64_t short_bytes = 0;
    for (int i = 0; i < 13; i += 2) short_bytes += ("short " + std::to_string(i)).size();
    // B's accepted three: the average of its 33 equal-sized lines (2 B of "b N" and "b NN").
    const uint64_t b_bytes = [] {
        uint64_t n = 0;
        for (int i = 0; i < 33; ++i) n += ("b " + std::to_string(i)).size();
        return n;
    }();
    CHECK(rig.m.group<shipper::SenderMetrics>().sent_bytes == short_bytes + b_bytes - b_bytes * 30 / 33);
    CHECK(rig.m.group<shipper::SenderMetrics>().rejected.value({"line_too_long"}) == 6);
    CHECK(rig.m.group<shipper::SenderMetrics>().rejected.value({"too_far_behind"}) == 30);
}

TEST_CASE("sender: the spool is acknowledged only up to the first record not answered for", "[loki][sender]") {
    Rig rig;
    rig.cfg.batch_max_bytes = 4096;  // several batches: B's later ones go while A's first waits
    const int64_t t = realtime_ns();
    rig.add(kA, "a first", t);
    for (int i = 0; i < 200; ++i) rig.add(kB, "b " + std::to_string(i) + std::string(100, 'b'), t + 1 + i);
    std::atomic<bool> loki_up_for_a{false};
    rig.script.answer = [&](const Request& r) -> HttpResult {
        if (r.streams[0] == kA && !loki_up_for_a) return {503, "at least 1 live replicas required\n", "", false};
        return ok();
    };
    rig.start();
    REQUIRE(rig.wait_for([&] { return rig.stored_with_locked("b ") == 200; }));
    CHECK(rig.spool.pending_bytes() > 0);  // A's record, and so everything after it, not acknowledged
    CHECK(rig.spool.acked() == spool::Position{1, 0});
    loki_up_for_a = true;
    REQUIRE(rig.wait_for([&] { return rig.spool.pending_bytes() == 0; }));
    CHECK(rig.stored_with("a ") == 1);
}

TEST_CASE("sender: each stream is paced below Loki's shard threshold, in pushes of a quarter of its pace",
          "[loki][sender]") {
    Rig rig;
    rig.cfg.max_stream_rate = 256 << 10;
    rig.script.answer = [](const Request&) { return ok(); };
    const int64_t t = realtime_ns();
    for (int i = 0; i < 400; ++i) rig.add(kA, std::to_string(i) + std::string(1000, 'x'), t + i);
    const auto t0 = std::chrono::steady_clock::now();
    rig.start();
    REQUIRE(rig.wait_for([&] { return rig.script.stored.size() == 400; }));
    REQUIRE(rig.wait_for([&] { return rig.spool.pending_bytes() == 0; }));  // counted, then settled
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard<std::mutex> lk(rig.script.mu);
    for (const auto& r : rig.script.seen) CHECK(r.bytes <= (64u << 10));
    // 400 KB at 256 KiB/s: every push but the first waits for the one before (a lower bound
    // only; a slow machine takes longer).
    CHECK(took >= (400.0 * 1001 - (64 << 10)) / (256 << 10) * 0.9);
    CHECK(rig.m.group<shipper::SenderMetrics>().sent == 400);
}

TEST_CASE("sender: megabytes of a stream Loki holds back do not hold another stream's lines behind them",
          "[loki][sender]") {
    Rig rig;
    const int64_t t = realtime_ns();
    // A: 3 MiB, twelve batches, refused by its per-stream limit every time; B: after all of it.
    for (int i = 0; i < 3000; ++i) rig.add(kA, "a " + std::to_string(i) + " " + std::string(1024, 'a'), t + i);
    for (int i = 0; i < 5; ++i) rig.add(kB, "b " + std::to_string(i), t + 5000 + i);
    rig.script.answer = [](const Request& r) { return r.streams[0] == kA ? per_stream_429(r) : ok(); };
    rig.start();
    // The window reads on past A's held batches while A waits (a minute bounds a hang).
    REQUIRE(rig.wait_for([&] { return rig.stored_with_locked("b ") == 5; }));
    CHECK(rig.stored_with("a ") == 0);
    CHECK(rig.spool.pending_bytes() > 0);  // A's lines stay in the spool until Loki takes them
}

TEST_CASE("sender: a spooled run that cannot go as it is goes entry by entry: too old in part, over the cap, metadata",
          "[loki][sender]") {
    for (const char* what : {"too old", "413", "metadata"}) {
        INFO(what);
        Rig rig;
        const int64_t t = realtime_ns();
        const std::string w = what;
        // One stream, one spool run: 300 lines of ~210 bytes, each with structured metadata; in the
        // first case its first 100 are older than Loki takes.
        for (int i = 0; i < 300; ++i) {
            const int64_t ts = w == "too old" && i < 100 ? t - rig.cfg.max_age_ms * 1'000'000 - 1'000'000'000 : t + i;
            const std::string line =
                "line " + std::to_string(i) + " " + std::string(200, static_cast<char>('a' + i % 26));
            REQUIRE(rig.spool.append(spool::Record{ts, kA, line, {{"step", "0"}}}) == spool::Spool::Append::kOk);
        }
        if (w == "metadata") rig.cfg.structured_metadata = false;
        rig.script.answer = [&](const Request& r) -> HttpResult {
            if (w == "413" && r.bytes > 20'000) return {413, "request body too large\n", "", false};
            return ok();
        };
        rig.start();
        const size_t want = w == "too old" ? 200 : 300;
        REQUIRE(rig.wait_for([&] { return rig.script.stored.size() == want; }));
        REQUIRE(rig.wait_for([&] { return rig.spool.pending_bytes() == 0; }));
        std::lock_guard<std::mutex> lk(rig.script.mu);
        // Each line once, in order.
        for (size_t i = 0; i < want; ++i)
            CHECK(rig.script.stored[i].rfind("line " + std::to_string(i + 300 - want) + " ", 0) == 0);
        CHECK(rig.m.group<shipper::SenderMetrics>().sent == want);
        size_t md = 0;
        for (const auto& r : rig.script.seen) md += r.metadata;
        if (w == "metadata") CHECK(md == 0);
        if (w == "413") {
            CHECK(rig.script.seen.size() > 4);  // the run, halved until it fit
            for (const auto& r : rig.script.seen) CHECK((r.bytes <= 20'000 || r.lines.size() > 1));
        }
        CHECK(rig.m.group<shipper::Drops>().of("too_old") == (w == "too old" ? 100u : 0u));
    }
}

TEST_CASE(
    "sender: a spool an older shipper wrote (single records, runs) then compressed runs: each line once, in order",
    "[loki][sender]") {
    Rig rig;
    const int64_t t = realtime_ns();
    {
        // What the older shipper left: a record of A, a run of A, a record of B.
        std::string old;
        spool::append_frame(old, spool::Record{t, kA, "a 0", {}});
        std::vector<spool::Record> run;
        for (int i = 1; i < 50; ++i) run.push_back({t + i, kA, "a " + std::to_string(i), {{"step", "0"}}});
        spool::append_run(old, run);
        spool::append_frame(old, spool::Record{t + 50, kB, "b 0", {}});
        std::ofstream(rig.dir.path() + "/spool/seg-0000000000000001", std::ios::binary | std::ios::app) << old;
    }
    REQUIRE(rig.spool.open({rig.dir.path() + "/spool"}));
    for (int i = 50; i < 300; ++i) rig.add(i % 5 ? kA : kB, (i % 5 ? "a " : "b ") + std::to_string(i), t + i);
    rig.ship_all(301);
    std::lock_guard<std::mutex> lk(rig.script.mu);
    std::vector<int> a, b;
    for (const auto& l : rig.script.stored) (l[0] == 'a' ? a : b).push_back(std::stoi(l.substr(2)));
    CHECK(std::is_sorted(a.begin(), a.end()));
    CHECK(std::is_sorted(b.begin(), b.end()));
    CHECK(std::adjacent_find(a.begin(), a.end()) == a.end());
    CHECK(a.size() + b.size() == 301);
    CHECK(a.front() == 0);
    CHECK(rig.m.group<shipper::SenderMetrics>().sent == 301);
}

TEST_CASE("sender: a huge line's run, then a run that goes entry by entry: each sent as written", "[loki][sender]") {
    // The first is over the cap (decompressed, a buffer of megabytes), the second partly too old
    // (decompressed again into the same buffer, which must not be let go under its views).
    Rig rig;
    const int64_t t = realtime_ns();
    const std::string huge = "huge " + std::string(1'500'000, 'h');
    rig.add(kA, huge, t);
    for (int i = 0; i < 20; ++i)
        rig.add(kA, "small " + std::to_string(i), i < 5 ? t - rig.cfg.max_age_ms * 1'000'000 - 1'000'000'000 : t + i);
    rig.ship_all(16);
    std::lock_guard<std::mutex> lk(rig.script.mu);
    CHECK(rig.script.stored[0] == huge);
    for (int i = 5; i < 20; ++i) CHECK(rig.script.stored[static_cast<size_t>(i - 4)] == "small " + std::to_string(i));
}

TEST_CASE("sender: too-old lines strewn through a run are dropped in passing, not one request per line",
          "[loki][sender]") {
    Rig rig;
    const int64_t t = realtime_ns();
    const int64_t old = t - rig.cfg.max_age_ms * 1'000'000 - 1'000'000'000;
    for (int i = 0; i < 300; ++i) rig.add(kA, "line " + std::to_string(i), i % 2 ? old : t + i);
    rig.ship_all(150);
    std::lock_guard<std::mutex> lk(rig.script.mu);
    CHECK(rig.script.seen.size() <= 2);
    for (size_t i = 0; i < 150; ++i) CHECK(rig.script.stored[i] == "line " + std::to_string(2 * i));
    CHECK(rig.m.group<shipper::Drops>().of("too_old") == 150);
}

TEST_CASE("sender: a stream whose spooled lines are all too old for Loki sends nothing, counts them, and moves on",
          "[loki][sender]") {
    // No push at all: not an empty one, and not one Loki would refuse as too old, again and again.
    Rig rig;
    const int64_t old = realtime_ns() - rig.cfg.max_age_ms * 1'000'000 - 1'000'000'000;
    for (int i = 0; i < 100; ++i) rig.add(kA, "stale " + std::to_string(i), old + i);
    rig.script.answer = [](const Request&) { return ok(); };
    rig.start();
    REQUIRE(rig.wait_for([&] { return rig.spool.pending_bytes() == 0; }));
    CHECK(rig.m.group<shipper::Drops>().of("too_old") == 100);
    // Then a fresh line goes alone.
    rig.add(kA, "fresh", realtime_ns());
    REQUIRE(rig.spool.sync());
    REQUIRE(rig.wait_for([&] { return rig.script.stored.size() == 1; }));
    std::lock_guard<std::mutex> lk(rig.script.mu);
    CHECK(rig.script.stored[0] == "fresh");
    REQUIRE(rig.script.seen.size() == 1);
    CHECK(rig.script.seen[0].lines.size() == 1);
}

TEST_CASE("sender: a 413 for a push of blank lines halves it until it fits: every line goes", "[loki][sender]") {
    // Blank lines weigh nothing to Loki's limits; a cap in their bytes alone would stay where it was.
    Rig rig;
    const int64_t t = realtime_ns();
    for (int i = 0; i < 200; ++i) rig.add(kA, "", t + i);
    rig.script.answer = [](const Request& r) -> HttpResult {
        if (r.lines.size() > 10) return {413, "request body too large\n", "", false};
        return ok();
    };
    rig.start();
    REQUIRE(rig.wait_for([&] { return rig.script.stored.size() == 200; }));
    REQUIRE(rig.wait_for([&] { return rig.spool.pending_bytes() == 0; }));
    CHECK(rig.m.group<shipper::SenderMetrics>().sent == 200);
    CHECK(rig.m.group<shipper::SenderMetrics>().rejected.empty());
}

TEST_CASE("sender: right after a Loki restart a 429 naming 8EB is no limit: the stream goes on at the limit named next",
          "[loki][sender]") {
    // Reference §12: the first over-limit push after a restart names the WAL replay's unlimited
    // rate, "8EB"; the next names the configured 64KB. Read as 8 bytes a second it held the
    // stream (and the lines behind it) for hours.
    Rig rig;
    const int64_t t = realtime_ns();
    for (int i = 0; i < 100; ++i) rig.add(kA, "a " + std::to_string(i) + " " + std::string(1000, 'a'), t + i);
    for (int i = 0; i < 5; ++i) rig.add(kB, "b " + std::to_string(i), t + 200 + i);
    bool restarted = true;
    rig.script.answer = [&](const Request& r) {
        if (r.streams[0] != kA || r.bytes <= 40 * 1024) return ok();
        const bool first = std::exchange(restarted, false);
        return per_stream_429(r, first ? "8EB" : "64KB");
    };
    rig.start();
    REQUIRE(rig.wait_for([&] { return rig.script.stored.size() == 105; }));
    REQUIRE(rig.wait_for([&] { return rig.spool.pending_bytes() == 0; }));
    CHECK(rig.m.group<shipper::SenderMetrics>().stream_rate_limit() == 64 * 1024);
    CHECK(rig.m.group<shipper::SenderMetrics>().sent == 105);
    std::lock_guard<std::mutex> lk(rig.log_mu);
    // The operator is told, once (not once per 429), and the absurd limit is named as such.
    const auto said = std::count_if(rig.log.begin(), rig.log.end(),
                                    [](const std::string& l) { return l.find("cannot be the limit") != l.npos; });
    CHECK(said == 1);
    const auto held = std::count_if(rig.log.begin(), rig.log.end(), [](const std::string& l) {
        return l.find(kA) != l.npos && l.find("429") != l.npos;
    });
    CHECK(held == 1);
}

TEST_CASE("sender: a 429 whose body names no limit makes the stream's requests smaller each time, down to one entry",
          "[loki][sender]") {
    // A proxy's 429 (or another Loki's wording): the same request again would be refused again.
    Rig rig;
    const int64_t t = realtime_ns();
    for (int i = 0; i < 60; ++i) rig.add(kA, "a " + std::to_string(i) + " " + std::string(1000, 'a'), t + i);
    rig.script.answer = [](const Request& r) -> HttpResult {
        if (r.lines.size() > 1) return {429, "<html><body>Too Many Requests</body></html>\n", "", false};
        return ok();
    };
    rig.start();
    REQUIRE(rig.wait_for([&] { return rig.script.stored.size() == 60; }));
    REQUIRE(rig.wait_for([&] { return rig.spool.pending_bytes() == 0; }));  // counted, then settled
    std::lock_guard<std::mutex> lk(rig.script.mu);
    // After each refusal the stream's next request is smaller than the refused one.
    for (size_t i = 0; i + 1 < rig.script.seen.size(); ++i)
        if (rig.script.seen[i].lines.size() > 1) {
            INFO("request " << i << " of " << rig.script.seen[i].lines.size() << " lines was refused");
            CHECK(rig.script.seen[i + 1].bytes < rig.script.seen[i].bytes);
        }
    std::vector<std::string> want;
    for (int i = 0; i < 60; ++i) want.push_back("a " + std::to_string(i) + " " + std::string(1000, 'a'));
    CHECK(rig.script.stored == want);  // each once, in order
    CHECK(rig.m.group<shipper::SenderMetrics>().sent == 60);
    std::lock_guard<std::mutex> lk2(rig.log_mu);
    CHECK(std::any_of(rig.log.begin(), rig.log.end(),
                      [](const std::string& l) { return l.find("no limit we can read") != l.npos; }));
}

TEST_CASE("sender: a request cap halved for a nameless 429 grows back with each success", "[loki][sender]") {
    // A burst of 429s from a proxy, then none: the stream does not go on one line per request.
    Rig rig;
    const int64_t t = realtime_ns();
    for (int i = 0; i < 400; ++i) rig.add(kA, "a " + std::to_string(i) + " " + std::string(200, 'a'), t + i);
    int refusals = 6;
    rig.script.answer = [&](const Request&) -> HttpResult {
        if (refusals-- > 0) return {429, "Too Many Requests\n", "", false};
        return ok();
    };
    rig.start();
    REQUIRE(rig.wait_for([&] { return rig.script.stored.size() == 400; }));
    std::lock_guard<std::mutex> lk(rig.script.mu);
    // Halved six times (to about 1/64 of 256 KiB), it doubles back: the last requests are large.
    CHECK(rig.script.seen[6].lines.size() < 30);
    CHECK(rig.script.seen.size() < 40);
}

TEST_CASE("sender: a wait for a named per-stream limit is never longer than max_backoff", "[loki][sender]") {
    // Loki names 1 KB/s once: paced at it, 30 lines of 3 KB would wait a minute and a half, past
    // wait_for's bound.
    Rig rig;
    const int64_t t = realtime_ns();
    for (int i = 0; i < 30; ++i) rig.add(kA, "a " + std::to_string(i) + " " + std::string(3000, 'a'), t + i);
    bool first = true;
    rig.script.answer = [&](const Request& r) {
        if (std::exchange(first, false)) return per_stream_429(r, "1KB");
        return ok();
    };
    rig.start();  // max_backoff 100 ms: 30 lines in about 3 s
    REQUIRE(rig.wait_for([&] { return rig.script.stored.size() == 30; }));
    REQUIRE(rig.wait_for([&] { return rig.spool.pending_bytes() == 0; }));  // counted, then settled
    CHECK(rig.m.group<shipper::SenderMetrics>().sent == 30);
}

TEST_CASE("sender: a per-stream limit Loki named is probed again after a while", "[loki][sender]") {
    // Loki's limits change (an operator raises one, a restart forgets one): a stream paced at an
    // old answer forever would never find out.
    Rig rig;
    const int64_t t = realtime_ns();
    for (int i = 0; i < 40; ++i) rig.add(kA, "a " + std::to_string(i) + " " + std::string(1000, 'a'), t + i);
    bool first = true;
    rig.script.answer = [&](const Request& r) {
        if (std::exchange(first, false)) return per_stream_429(r, "1KB");
        return ok();
    };
    rig.reprobe_ns = 300'000'000;
    rig.start();
    REQUIRE(rig.wait_for([&] { return rig.script.stored.size() == 40; }));
    std::lock_guard<std::mutex> lk(rig.script.mu);
    // One line a request while the 1 KB/s answer holds, then the rest at once.
    CHECK(rig.script.seen[1].lines.size() == 1);
    CHECK(rig.script.seen.back().lines.size() > 1);
}

TEST_CASE("sender: the acknowledged position on disk follows each answered push, not the read batch's end",
          "[loki][sender]") {
    // One long stream, read as one batch (its spool frames are compressed: 2 MB of lines in far
    // less than batch_max_bytes), sent in pushes of a few runs. Loki answers four pushes, then
    // goes away: a shipper killed now must send again only what was not answered.
    Rig rig;
    rig.cfg.batch_max_bytes = 256 << 10;
    const int64_t t = realtime_ns();
    const int lines = 2000;
    for (int i = 0; i < lines; ++i) rig.add(kA, "a " + std::to_string(i) + " " + std::string(1000, 'a'), t + i);
    std::atomic<bool> up{false};
    int answered = 0;
    rig.script.answer = [&](const Request&) -> HttpResult {
        if (answered == 4 && !up) return {503, "at least 1 live replicas required\n", "", false};
        ++answered;
        return ok();
    };
    rig.start();
    REQUIRE(rig.wait_for([&] { return answered == 4 && rig.script.seen.size() > 5; }));
    const size_t stored = rig.stored_with("a ");
    REQUIRE(stored > 0);
    REQUIRE(stored < static_cast<size_t>(lines));
    {
        // What a shipper started now (after a kill -9) reads first: the line after the answered ones.
        spool::Spool after;
        REQUIRE(after.open({rig.dir.path() + "/spool"}));
        std::vector<spool::Record> again;
        spool::Position end;
        REQUIRE(after.read(again, 1, 1 << 20, end) > 0);
        CHECK(again.front().line.substr(0, again.front().line.find(' ', 2)) == "a " + std::to_string(stored));
    }
    up = true;
    REQUIRE(rig.wait_for([&] { return rig.stored_with_locked("a ") == static_cast<size_t>(lines); }));
    REQUIRE(rig.wait_for([&] { return rig.spool.pending_bytes() == 0; }));
}

TEST_CASE("sender: one line Loki refuses as too large (413) is dropped and counted, the next ones go",
          "[loki][sender]") {
    Rig rig;
    const int64_t t = realtime_ns();
    rig.add(kA, "a 0", t);
    rig.add(kA, "a 1 " + std::string(50'000, 'x'), t + 1);
    rig.add(kA, "a 2", t + 2);
    rig.script.answer = [](const Request& r) -> HttpResult {
        if (r.bytes > 10'000) return {413, "request body too large\n", "", false};
        return ok();
    };
    rig.start();
    REQUIRE(rig.wait_for([&] { return rig.stored_with_locked("a 2") == 1; }));
    REQUIRE(rig.wait_for([&] { return rig.spool.pending_bytes() == 0; }));
    std::lock_guard<std::mutex> lk(rig.script.mu);
    CHECK(rig.stored_with_locked("a ") == 2);
    size_t tries = 0;
    for (const auto& r : rig.script.seen) tries += r.bytes > 10'000 && r.lines.size() == 1;
    CHECK(tries == 1);  // the lone line once: not again, and again
    CHECK(rig.m.group<shipper::SenderMetrics>().sent == 2);
    CHECK(rig.m.group<shipper::SenderMetrics>().rejected.value({"request_too_large"}) == 1);
}

TEST_CASE("sender: a record of an older spool format larger than the stream's request cap goes alone, no empty push",
          "[loki][sender]") {
    Rig rig;
    rig.cfg.max_stream_rate = 64 << 10;  // requests of 16 KiB at most
    const int64_t t = realtime_ns();
    {
        std::string old;
        spool::append_frame(old, spool::Record{t, kA, "a 0 " + std::string(40'000, 'x'), {}});
        spool::append_frame(old, spool::Record{t + 1, kA, "a 1", {}});
        std::ofstream(rig.dir.path() + "/spool/seg-0000000000000001", std::ios::binary | std::ios::app) << old;
    }
    REQUIRE(rig.spool.open({rig.dir.path() + "/spool"}));
    rig.ship_all(2);
    std::lock_guard<std::mutex> lk(rig.script.mu);
    for (const auto& r : rig.script.seen) CHECK(!r.lines.empty());
    CHECK(rig.script.seen.size() == 2);
    CHECK(rig.m.group<shipper::SenderMetrics>().sent == 2);
}

TEST_CASE("sender: a push takes lines up to the request cap to the byte, not one byte less", "[loki][sender]") {
    // What a request weighs: each entry's line and metadata bytes, and one byte an entry. Three
    // runs of stream A (B's lines between them) of 10 lines of 2 bytes weigh 30 bytes each: a cap
    // of 90 takes them in one push, a cap of 89 in two. The same for records of the older spool
    // format (single frames: 2 bytes of line and 1). The cap here is the stream's pace (a quarter
    // of max_stream_rate a push); batch.max_bytes bounds the spool bytes read, labels and all.
    for (const bool runs : {true, false}) {
        for (const uint64_t cap : {90u, 89u}) {
            INFO((runs ? "runs, cap " : "older records, cap ") << cap);
            Rig rig;
            rig.cfg.max_stream_rate = cap * 4;
            const int64_t t = realtime_ns();
            if (runs) {
                for (int i = 0; i < 30; ++i) {
                    rig.add(kA, "a" + std::to_string(i % 10), t + i);
                    if (i % 10 == 9) rig.add(kB, "b" + std::to_string(i), t + i);
                }
            } else {
                std::string old;
                for (int i = 0; i < 30; ++i)
                    spool::append_frame(old, spool::Record{t + i, kA, "a" + std::to_string(i % 10), {}});
                std::ofstream(rig.dir.path() + "/spool/seg-0000000000000001", std::ios::binary | std::ios::app) << old;
                REQUIRE(rig.spool.open({rig.dir.path() + "/spool"}));
            }
            rig.script.answer = [](const Request&) { return ok(); };
            rig.start();
            REQUIRE(rig.wait_for([&] { return rig.stored_with_locked("a") == 30; }));
            REQUIRE(rig.wait_for([&] { return rig.spool.pending_bytes() == 0; }));
            std::lock_guard<std::mutex> lk(rig.script.mu);
            std::vector<size_t> pushes_of_a;
            for (const auto& r : rig.script.seen)
                if (r.streams.size() == 1 && r.streams[0] == kA) pushes_of_a.push_back(r.lines.size());
            if (runs)
                CHECK(pushes_of_a == (cap == 90 ? std::vector<size_t>{30} : std::vector<size_t>{20, 10}));
            else
                CHECK(pushes_of_a == (cap == 90 ? std::vector<size_t>{30} : std::vector<size_t>{29, 1}));
        }
    }
}

TEST_CASE("sender: a run over the request cap goes entry by entry, each push filled to the cap's byte",
          "[loki][sender]") {
    // 31 lines of 2 bytes in one run weigh 93 bytes, over a cap of 90: entry by entry, 3 bytes
    // each, 30 fill the first push exactly and the last goes alone.
    Rig rig;
    rig.cfg.max_stream_rate = 90 * 4;
    const int64_t t = realtime_ns();
    for (int i = 0; i < 31; ++i) rig.add(kA, "a" + std::to_string(i % 10), t + i);
    rig.ship_all(31);
    std::lock_guard<std::mutex> lk(rig.script.mu);
    std::vector<size_t> pushes;
    for (const auto& r : rig.script.seen) pushes.push_back(r.lines.size());
    CHECK(pushes == std::vector<size_t>{30, 1});
    for (size_t i = 0; i < 31; ++i) CHECK(rig.script.stored[i] == "a" + std::to_string(i % 10));
}

TEST_CASE("sender: while a stream waits, the window reads ahead exactly kWindowBatches batches, no more",
          "[loki][sender]") {
    using shipper::Sender;
    // Loki down for A's two streams: their batches fill the window; B's line comes right after.
    // With batch.max_bytes of one byte each batch is one frame, and alternating streams make each
    // record a frame of its own.
    const std::string kA2 = "{job=\"a2\", service_name=\"a2\"}";
    const size_t held = GENERATE(Sender::kWindowBatches - 1, Sender::kWindowBatches);
    INFO(held << " batches of A's before B's");
    Rig rig;
    rig.cfg.batch_max_bytes = 1;
    const int64_t t = realtime_ns();
    for (size_t i = 0; i < held; ++i) rig.add(i % 2 ? kA2 : kA, "a " + std::to_string(i), t + static_cast<int64_t>(i));
    rig.add(kB, "b 0", t + 100);
    std::atomic<bool> loki_up_for_a{false};
    rig.script.answer = [&](const Request& r) -> HttpResult {
        if (r.streams[0] != kB && !loki_up_for_a) return {503, "at least 1 live replicas required\n", "", false};
        return ok();
    };
    rig.start();
    if (held < Sender::kWindowBatches) {
        // B's batch fits in the window: it goes while A's wait.
        REQUIRE(rig.wait_for([&] { return rig.stored_with_locked("b ") == 1; }));
        CHECK(rig.stored_with("a ") == 0);
    } else {
        // The window is full of A's batches: B waits for them, though A has been tried and
        // refused again and again (backing off 10 to 100 ms).
        REQUIRE(rig.wait_for([&] {
            return std::count_if(rig.script.seen.begin(), rig.script.seen.end(),
                                 [&](const Request& r) { return r.streams[0] == kA; }) >= 4;
        }));
        CHECK(rig.stored_with("b ") == 0);
    }
    loki_up_for_a = true;
    REQUIRE(rig.wait_for([&] { return rig.spool.pending_bytes() == 0; }));
    CHECK(rig.stored_with("a ") == held);
    CHECK(rig.stored_with("b ") == 1);
}

TEST_CASE(
    "sender: spooled runs go as they are several to a push: with metadata to a Loki that takes it, none to one "
    "that does not",
    "[loki][sender]") {
    // Three runs of A (B's lines between them) of 10 lines each, in one push either way: runs
    // with metadata for a Loki that takes it, runs without for one that does not. Neither needs
    // decompressing entry by entry (which sends one run a push).
    for (const bool metadata : {true, false}) {
        INFO((metadata ? "metadata, Loki takes it" : "no metadata, Loki takes none"));
        Rig rig;
        rig.cfg.structured_metadata = metadata;
        const int64_t t = realtime_ns();
        for (int i = 0; i < 30; ++i) {
            spool::Record r{t + i, kA, "a " + std::to_string(i), {}};
            if (metadata) r.metadata = {{"step", std::to_string(i)}};
            REQUIRE(rig.spool.append(r) == spool::Spool::Append::kOk);
            if (i % 10 == 9) rig.add(kB, "b " + std::to_string(i), t + i);
        }
        rig.script.answer = [](const Request&) { return ok(); };
        rig.start();
        REQUIRE(rig.wait_for([&] { return rig.stored_with_locked("a ") == 30; }));
        REQUIRE(rig.wait_for([&] { return rig.spool.pending_bytes() == 0; }));
        std::lock_guard<std::mutex> lk(rig.script.mu);
        std::vector<size_t> pushes_of_a, metadata_of_a;
        for (const auto& r : rig.script.seen)
            if (r.streams.size() == 1 && r.streams[0] == kA) {
                pushes_of_a.push_back(r.lines.size());
                metadata_of_a.push_back(r.metadata);
            }
        CHECK(pushes_of_a == std::vector<size_t>{30});
        CHECK(metadata_of_a == std::vector<size_t>{metadata ? 30u : 0u});
    }
}

TEST_CASE("sender: a spooled run that does not decompress is dropped counted and said, the line after it goes",
          "[loki][sender]") {
    // A run whose frame is whole (its checksum right) but whose snappy block is not: it cannot
    // go as it is to a Loki that takes no metadata, and it cannot be decompressed either.
    Rig rig;
    rig.cfg.structured_metadata = false;
    const int64_t t = realtime_ns();
    {
        std::string seg;
        std::vector<spool::Record> run;
        for (int i = 0; i < 3; ++i) run.push_back({t + i, kA, "a " + std::to_string(i), {{"step", "0"}}});
        spool::append_compressed_run(seg, run);
        std::vector<spool::RecordView> views;
        std::vector<spool::MetadataView> md;
        std::vector<spool::RunView> runs;
        size_t used = 0;
        REQUIRE(spool::decode_frame(seg, views, md, runs, &used) == spool::DecodeStatus::kOk);
        // Its first element a copy from before the start of the output: snappy refuses it.
        seg[static_cast<size_t>(runs.back().elements().data() - seg.data())] = '\x01';
        spool::put_frame_header(seg.data(), seg.size() - spool::kFrameHeader);
        REQUIRE(spool::decode_frame(seg, views, md, runs, &used) == spool::DecodeStatus::kOk);
        spool::append_compressed_run(seg, {{t + 3, kA, "a 3", {}}});
        std::ofstream(rig.dir.path() + "/spool/seg-0000000000000001", std::ios::binary | std::ios::app) << seg;
    }
    REQUIRE(rig.spool.open({rig.dir.path() + "/spool"}));
    rig.ship_all(1);
    {
        std::lock_guard<std::mutex> lk(rig.script.mu);
        CHECK(rig.script.stored == std::vector<std::string>{"a 3"});
        for (const auto& r : rig.script.seen) CHECK(!r.lines.empty());
    }
    CHECK(rig.m.group<shipper::Drops>().of("spool_corrupt") == 3);
    CHECK(rig.m.group<shipper::SenderMetrics>().sent == 1);
    std::lock_guard<std::mutex> lk(rig.log_mu);
    CHECK(std::count_if(rig.log.begin(), rig.log.end(), [](const std::string& l) {
              return l.rfind("error: ", 0) == 0 && l.find("run of 3 records") != l.npos &&
                     l.find("does not decode") != l.npos;
          }) == 1);
}

TEST_CASE(
    "sender: lines a stopped sender had not had answered go when it runs again or with the next sender, each once",
    "[loki][sender]") {
    for (const bool same : {false, true}) {
        INFO((same ? "the same sender run again" : "another sender on that spool"));
        Rig rig;
        const int64_t t = realtime_ns();
        for (int i = 0; i < 20; ++i) rig.add(i % 2 ? kA : kB, (i % 2 ? "a " : "b ") + std::to_string(i), t + i);
        std::atomic<bool> up{false};
        rig.script.answer = [&](const Request&) -> HttpResult {
            if (!up) return {503, "at least 1 live replicas required\n", "", false};
            return ok();
        };
        rig.start();
        REQUIRE(rig.wait_for([&] { return rig.script.seen.size() >= 4; }));
        rig.stop = true;
        rig.thread.join();
        CHECK(rig.spool.pending_bytes() > 0);
        // Loki is back; the shipper goes on.
        up = true;
        rig.stop = false;
        if (same)
            rig.thread = std::thread([&] { rig.sender->run(rig.stop); });
        else
            rig.start();
        REQUIRE(rig.wait_for([&] { return rig.script.stored.size() == 20; }));
        REQUIRE(rig.wait_for([&] { return rig.spool.pending_bytes() == 0; }));
        std::lock_guard<std::mutex> lk(rig.script.mu);
        std::vector<std::string> want, stored = rig.script.stored;
        for (int i = 0; i < 20; ++i) want.push_back((i % 2 ? "a " : "b ") + std::to_string(i));
        std::sort(stored.begin(), stored.end());
        std::sort(want.begin(), want.end());
        CHECK(stored == want);
    }
}

TEST_CASE("sender: a push Loki answers while the sender stops is acknowledged and not sent again", "[loki][sender]") {
    // SIGTERM while a push is in flight: the sender waits for Loki's answer (within the client's
    // timeout) and keeps it, so the next start does not push those lines a second time.
    // Loki's gate outlives the Rig (whose end joins the worker waiting at it), and is opened
    // however the case ends.
    std::mutex gate_mu;
    std::condition_variable gate_cv;
    bool open = false;
    const auto open_gate = [&] {
        {
            std::lock_guard<std::mutex> lk(gate_mu);
            open = true;
        }
        gate_cv.notify_all();
    };
    Rig rig;
    struct Opener {
        std::function<void()> f;
        ~Opener() { f(); }
    } opener{open_gate};
    const int64_t t = realtime_ns();
    for (int i = 0; i < 10; ++i) rig.add(kA, "a " + std::to_string(i), t + i);
    std::atomic<bool> entered{false};
    rig.script.answer = [&](const Request&) -> HttpResult {
        entered = true;
        std::unique_lock<std::mutex> lk(gate_mu);
        gate_cv.wait(lk, [&] { return open; });
        return ok();
    };
    rig.start();
    for (int i = 0; i < 6000 && !entered; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    REQUIRE(entered);
    rig.stop = true;
    // Loki answers late: a sender that returned before the answer had forgotten the push.
    std::atomic<bool> returned{false};
    std::thread joiner([&] {
        rig.thread.join();
        returned = true;
    });
    for (int i = 0; i < 50 && !returned; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    open_gate();
    joiner.join();
    {
        std::lock_guard<std::mutex> lk(rig.script.mu);
        REQUIRE(rig.script.seen.size() == 1);
        CHECK(rig.script.stored.size() == 10);
    }
    CHECK(rig.spool.pending_bytes() == 0);
    // The next start sends the line written since, and only it.
    rig.stop = false;
    rig.sender.reset();
    rig.add(kA, "a 10", t + 10);
    rig.script.answer = [](const Request&) { return ok(); };
    rig.start();
    REQUIRE(rig.wait_for([&] { return rig.spool.pending_bytes() == 0; }));
    std::lock_guard<std::mutex> lk(rig.script.mu);
    CHECK(rig.script.stored.size() == 11);
    CHECK(rig.script.stored.back() == "a 10");
}

TEST_CASE("sender: a spool segment it cannot open for a while is read once it can, and no line is lost",
          "[loki][sender]") {
    // The shipper out of descriptors, say: the segment is there but its open fails. The sender
    // tries again after batch_wait, not only when it is stopped.
    Rig rig;
    const int64_t t = realtime_ns();
    for (int i = 0; i < 5; ++i) rig.add(kA, "a " + std::to_string(i), t + i);
    REQUIRE(rig.spool.sync());
    const std::string seg = rig.dir.path() + "/spool/seg-0000000000000001";
    REQUIRE(::rename(seg.c_str(), (seg + ".away").c_str()) == 0);
    rig.script.answer = [](const Request&) { return ok(); };
    rig.start();
    // Several of its tries fail to open it (how many does not matter for what is checked).
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK(rig.stored_with("a ") == 0);
    REQUIRE(::rename((seg + ".away").c_str(), seg.c_str()) == 0);
    REQUIRE(rig.wait_for([&] { return rig.script.stored.size() == 5; }));
    REQUIRE(rig.wait_for([&] { return rig.spool.pending_bytes() == 0; }));
}

TEST_CASE("sender: records of an older spool format too old for Loki are dropped and counted, the others go",
          "[loki][sender]") {
    Rig rig;
    const int64_t t = realtime_ns();
    const int64_t old = t - rig.cfg.max_age_ms * 1'000'000 - 1'000'000'000;
    {
        std::string frames;
        for (int i = 0; i < 4; ++i)
            spool::append_frame(frames, spool::Record{i % 2 ? t + i : old, kA, "a " + std::to_string(i), {}});
        std::ofstream(rig.dir.path() + "/spool/seg-0000000000000001", std::ios::binary | std::ios::app) << frames;
    }
    REQUIRE(rig.spool.open({rig.dir.path() + "/spool"}));
    rig.ship_all(2);
    {
        std::lock_guard<std::mutex> lk(rig.script.mu);
        CHECK(rig.script.stored == std::vector<std::string>{"a 1", "a 3"});
    }
    CHECK(rig.m.group<shipper::Drops>().of("too_old") == 2);
    CHECK(rig.m.group<shipper::SenderMetrics>().sent == 2);
}

TEST_CASE("sender: an acknowledgement the spool cannot write is said as a warning and the lines still go",
          "[loki][sender]") {
    for (const bool at_drain : {false, true}) {
        // Every ack written at once: each fails (and is said). Or written at most once a minute
        // and when the spool is drained: the first drain's is, the next drain's fails.
        INFO((at_drain ? "written when drained" : "written at every ack"));
        Rig rig;
        spool::Options o{rig.dir.path() + "/spool"};
        if (at_drain) o.ack_persist_ms = 60'000;
        REQUIRE(rig.spool.open(o));
        rig.script.answer = [](const Request&) { return ok(); };
        const auto block_ack = [&] {
            // Where the acknowledged position goes, a directory that a rename cannot replace.
            const std::string acked = rig.dir.path() + "/spool/acked";
            ::unlink(acked.c_str());
            REQUIRE(::mkdir(acked.c_str(), 0700) == 0);
            std::ofstream(acked + "/x") << "x";
        };
        if (at_drain) {
            const std::string acked = rig.dir.path() + "/spool/acked";
            const auto before = read_small_file(acked);
            rig.add(kA, "a 0", realtime_ns());
            rig.start();
            REQUIRE(rig.wait_for([&] { return rig.spool.pending_bytes() == 0; }));
            // The drained spool's acknowledgement written before it is blocked: the one that
            // fails is the next.
            REQUIRE(rig.wait_for([&] { return read_small_file(acked) != before; }));
            block_ack();
            rig.add(kA, "a 1", realtime_ns());
            REQUIRE(rig.spool.sync());
        } else {
            block_ack();
            rig.add(kA, "a 0", realtime_ns());
            rig.add(kA, "a 1", realtime_ns());
            rig.start();
        }
        REQUIRE(rig.wait_for([&] { return rig.script.stored.size() == 2; }));
        CHECK(rig.wait_for([&] {
            std::lock_guard<std::mutex> lk(rig.log_mu);
            return std::any_of(rig.log.begin(), rig.log.end(), [](const std::string& l) {
                return l.rfind("warning: spool: ", 0) == 0 && l.find("acked") != l.npos;
            });
        }));
    }
}

TEST_CASE("sender: the lane's oldest record not acknowledged is the one Loki refuses, none once Loki has it all",
          "[loki][sender]") {
    // What jobtrail_shipper_spool_oldest_age_seconds is made of: the node lane's oldest record's
    // own timestamp while Loki holds it back, 0 once everything is acknowledged.
    Rig rig;
    const int64_t t = realtime_ns() - 5'000'000'000;
    rig.add(kA, "a 0", t);
    rig.add(kA, "a 1", t + 1);
    std::atomic<bool> up{false};
    rig.script.answer = [&](const Request&) -> HttpResult {
        if (!up) return {503, "at least 1 live replicas required\n", "", false};
        return ok();
    };
    auto& oldest = rig.m.group<shipper::LaneMetrics>().oldest_pending_ns[shipper::lane_index(shipper::Lane::kNode)];
    rig.start();
    REQUIRE(rig.wait_for([&] { return rig.script.seen.size() >= 2; }));
    CHECK(oldest == t);
    up = true;
    REQUIRE(rig.wait_for([&] { return rig.script.stored.size() == 2; }));
    REQUIRE(rig.wait_for([&] { return rig.spool.pending_bytes() == 0; }));
    CHECK(rig.wait_for([&] { return oldest == 0; }));
}
