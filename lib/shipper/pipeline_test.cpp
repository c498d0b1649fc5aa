#include "shipper/pipeline.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <stop_token>
#include <thread>

#include "captured.hpp"
#include "common/fs.hpp"
#include "common/time.hpp"
#include "file_size_limit.hpp"
#include "loki/client.hpp"
#include "loki_double.hpp"
#include "shipper/recovery.hpp"
#include "shipper/sources/file/file_source.hpp"
#include "skip.hpp"
#include "temp_dir.hpp"
#include "unmount.hpp"

using namespace jobtrail::shipper;

namespace {

// Hands out "line <i>" for i in [next, end) and knows its position, like a file.
class CountingSource : public Source {
public:
    CountingSource(uint64_t end, NodeInfo node)
        : end_(end),
          origin_(make_origin({{"job", "test"}, {"node", node.node}}, {}, jobtrail::node::StreamKind::kOther)) {}
    const std::string& name() const override { return name_; }
    bool poll(std::vector<Event>& out, size_t) override {
        // A few at a time, so a run takes several passes and group commits.
        for (int i = 0; i < 7 && next_ < end_; ++i, ++next_)
            out.push_back({1'700'000'000'000'000'000 + static_cast<int64_t>(next_),
                           origin_,
                           "line " + std::to_string(next_),
                           {},
                           false});
        return next_ < end_;
    }
    nlohmann::json checkpoint() const override { return {{"next", next_}}; }
    void restore(const nlohmann::json& s) override {
        if (s.contains("next")) next_ = s["next"].get<uint64_t>();
    }

private:
    std::string name_ = "count";
    uint64_t next_ = 0, end_;
    std::shared_ptr<const Origin> origin_;
};

jobtrail::config::Config config(const std::string& state) {
    jobtrail::config::Config c;
    c.collector.state_dir = state;
    c.shipper.loki_url.clear();  // spool only: the sender is tested on its own
    c.shipper.heartbeat_ms = 0;
    c.shipper.metrics_listen.clear();
    return c;
}

// --once, as the shipper's main runs it.
int run_once(Pipeline& p, int64_t timeout_ms = 20'000) {
    std::atomic<bool> stop{false};
    RunOptions o;
    o.once = true;
    o.once_timeout_ms = timeout_ms;
    return p.run(o, stop);
}

int run(const jobtrail::config::Config& c, uint64_t lines) {
    Pipeline p(c, [lines](const SourceContext& ctx) {
        std::vector<std::unique_ptr<Source>> v;
        v.push_back(std::make_unique<CountingSource>(lines, ctx.node));
        return v;
    });
    return run_once(p);
}

// A --once run of `lines`, and the checkpoint it left, which names the node lane's spool end.
Checkpoint run_checkpointed(const jobtrail::config::Config& c, uint64_t lines) {
    REQUIRE(run(c, lines) == 0);
    Checkpoint cp = read_checkpoint(c.collector.state_dir + "/shipper-checkpoint.json");
    REQUIRE(cp.end(Lane::kNode));
    return cp;
}

// Every line in the spool, with how often it is there.
std::map<std::string, int> spooled(const std::string& state) {
    jobtrail::spool::Spool s;
    REQUIRE(s.open({state + "/spool"}));
    std::map<std::string, int> out;
    std::vector<jobtrail::spool::Record> recs;
    jobtrail::spool::Position end;
    while (s.read(recs, 1000, 1 << 20, end) > 0)
        for (const auto& r : recs) ++out[r.line];
    return out;
}

}  // namespace

TEST_CASE("pipeline: a line is in the spool once, and the checkpoint covers exactly what is spooled", "[shipper]") {
    jobtrail::test::TempDir d;
    const auto c = config(d.path());
    const Checkpoint cp = run_checkpointed(c, 100);
    CHECK(cp.sources["count"]["next"] == 100);
    auto lines = spooled(d.path());
    CHECK(lines.size() == 100);
    for (const auto& [l, n] : lines) CHECK(n == 1);

    // A crash after records were spooled and synced but before their checkpoint was written:
    // the source will read them again, so a restart must cut them from the spool.
    {
        jobtrail::spool::Spool s;
        REQUIRE(s.open({d.path() + "/spool"}));
        for (int i = 100; i < 105; ++i)
            REQUIRE(s.append(jobtrail::spool::Record{1, "{job=\"test\"}", "line " + std::to_string(i), {}}) ==
                    jobtrail::spool::Spool::Append::kOk);
        REQUIRE(s.sync());
    }
    CHECK(spooled(d.path()).size() == 105);
    REQUIRE(run(c, 110) == 0);
    lines = spooled(d.path());
    CHECK(lines.size() == 110);
    for (const auto& [l, n] : lines) CHECK(n == 1);
    CHECK(read_checkpoint(d.path() + "/shipper-checkpoint.json").sources["count"]["next"] == 110);
}

TEST_CASE("pipeline: a damaged spool position in the checkpoint is ignored, the sources' positions hold", "[shipper]") {
    jobtrail::test::TempDir d;
    const auto c = config(d.path());
    REQUIRE(jobtrail::write_file_atomic(d.path() + "/shipper-checkpoint.json",
                                        R"({"spool": {"segment": "x"}, "sources": {"count": {"next": 7}}})", 0644)
                .ok);
    const Checkpoint cp = read_checkpoint(d.path() + "/shipper-checkpoint.json");
    CHECK_FALSE(cp.end(Lane::kNode));
    REQUIRE(run(c, 20) == 0);
    // The sources' part was readable: the source resumed at 7.
    CHECK(spooled(d.path()).size() == 13);
}

TEST_CASE("pipeline: a checkpoint with bytes that are not UTF-8 is still written", "[shipper]") {
    std::vector<std::unique_ptr<Source>> sources;
    struct Odd : CountingSource {
        Odd() : CountingSource(0, {"c", "n"}) {}
        nlohmann::json checkpoint() const override { return {{"path", std::string("/nccl/1/\xff.log")}}; }
    };
    sources.push_back(std::make_unique<Odd>());
    const std::string text =
        checkpoint_text({jobtrail::spool::Position{1, 0}, jobtrail::spool::Position{1, 0}}, sources);
    CHECK(nlohmann::json::parse(text)["sources"]["count"]["path"] == "/nccl/1/\xef\xbf\xbd.log");
}

namespace {

// Padding that does not compress (the spool compresses runs): the disk fills where the test says.
std::string noise(size_t n, uint64_t seed) {
    std::string s(n, ' ');
    auto x = static_cast<uint32_t>(seed);
    for (auto& c : s) {
        x = x * 1664525u + 1013904223u;
        c = static_cast<char>('!' + (x >> 24) % 90);
    }
    return s;
}

// A job's NCCL file that never ends: as many lines as a pass takes.
class FloodSource : public Source {
public:
    explicit FloodSource(NodeInfo node, bool incompressible = false)
        : incompressible_(incompressible),
          origin_(make_origin({{"job", "nccl"}, {"job_id", "4242"}, {"node", node.node}}, {},
                              jobtrail::node::StreamKind::kNccl, "4242")) {}
    const std::string& name() const override { return name_; }
    jobtrail::node::StreamKind kind() const override { return jobtrail::node::StreamKind::kNccl; }
    bool poll(std::vector<Event>& out, size_t max_bytes) override {
        for (size_t b = 0; b < max_bytes; ++next_) {
            out.push_back(
                {1'700'000'000'000'000'000 + static_cast<int64_t>(next_),
                 origin_,
                 "nccl " + std::to_string(next_) + " " + (incompressible_ ? noise(100, next_) : std::string(100, 'n')),
                 {},
                 false});
            b += out.back().line.size();
        }
        return true;
    }
    nlohmann::json checkpoint() const override { return {{"next", next_}}; }
    void restore(const nlohmann::json& s) override {
        if (s.contains("next")) next_ = s["next"].get<uint64_t>();
    }

private:
    std::string name_ = "flood";
    uint64_t next_ = 0;
    bool incompressible_;
    std::shared_ptr<const Origin> origin_;
};

}  // namespace

TEST_CASE("pipeline: a job's NCCL flood fills only the jobs lane, the node's records keep being spooled", "[shipper]") {
    jobtrail::test::TempDir d;
    auto c = config(d.path());
    c.shipper.spool_max_bytes = 4 << 20;  // 2 MiB a lane
    c.shipper.nccl_budget_bytes = 0;      // the lane, not the budget, is under test
    Pipeline p(c, [](const SourceContext& ctx) {
        std::vector<std::unique_ptr<Source>> v;
        v.push_back(std::make_unique<FloodSource>(ctx.node));
        v.push_back(std::make_unique<CountingSource>(2000, ctx.node));
        return v;
    });
    // No Loki takes anything: the jobs lane stays full until the timeout.
    CHECK(run_once(p, 3'000) == 2);
    CHECK(p.metrics().group<PipelineMetrics>().spool_full > 0);
    // Every line of the node's source is in the node lane, once, beside the shipper's own
    // "lane is full" warning: once, worded as on stderr (no "pipeline: " for the pipeline's own).
    size_t counted = 0, warned = 0;
    for (const auto& [l, n] : spooled(d.path())) {
        if (l.rfind("warning: spool lane 'jobs' is full (", 0) == 0 &&
            l.ends_with(" bytes); its sources paused until Loki takes more")) {
            ++warned;
            CHECK(n == 1);
        }
        if (l.rfind("line ", 0) != 0) continue;
        ++counted;
        CHECK(n == 1);
    }
    CHECK(counted == 2000);
    CHECK(warned >= 1);

    // The flood is in its own lane, bounded by its share, and what the checkpoint says was read
    // is exactly what that lane holds: the pause lost nothing.
    jobtrail::spool::Spool s;
    REQUIRE(s.open({d.path() + "/spool/jobs"}));
    CHECK(s.pending_bytes() <= (2u << 20));
    std::vector<jobtrail::spool::Record> recs;
    jobtrail::spool::Position end;
    uint64_t n = 0;
    while (s.read(recs, 1000, 1 << 20, end) > 0)
        for (const auto& r : recs) {
            CHECK(r.line.rfind("nccl " + std::to_string(n) + " ", 0) == 0);
            ++n;
        }
    CHECK(n > 1000);
    const Checkpoint cp = read_checkpoint(d.path() + "/shipper-checkpoint.json");
    CHECK(cp.sources["flood"]["next"] == n);
    CHECK(cp.sources["count"]["next"] == 2000);
    REQUIRE(cp.end(Lane::kJobs));
}

TEST_CASE("pipeline: a lane holding more than its share from before keeps reading its sources, bounded anew",
          "[shipper]") {
    // The spool's max_size made smaller (or the single spool before lanes) while Loki was
    // away: what the lane holds already does not stop its sources until Loki takes it.
    jobtrail::test::TempDir d;
    auto flood = [](const SourceContext& ctx) {
        std::vector<std::unique_ptr<Source>> v;
        v.push_back(std::make_unique<FloodSource>(ctx.node, /*incompressible=*/true));
        return v;
    };
    auto c = config(d.path());
    c.shipper.nccl_budget_bytes = 0;
    c.shipper.spool_max_bytes = 12 << 20;  // 6 MiB a lane
    {
        Pipeline p(c, flood);
        CHECK(run_once(p, 3'000) == 2);  // no Loki: the lane fills
    }
    const auto pending = [&] {
        jobtrail::spool::Spool s;
        REQUIRE(s.open({d.path() + "/spool/jobs"}));
        return s.pending_bytes();
    };
    const uint64_t before = pending();
    REQUIRE(before > (5u << 19));  // more than the 2 MiB share below
    const uint64_t read_before = read_checkpoint(d.path() + "/shipper-checkpoint.json").sources["flood"]["next"];

    c.shipper.spool_max_bytes = 4 << 20;  // 2 MiB a lane now, less than the lane holds
    {
        Pipeline p(c, flood);
        CHECK(run_once(p, 3'000) == 2);
    }
    const uint64_t read_after = read_checkpoint(d.path() + "/shipper-checkpoint.json").sources["flood"]["next"];
    INFO("lines read before the restart " << read_before << ", after " << read_after);
    CHECK(read_after > read_before);  // without the lane's new bound: not one line more
    const uint64_t after = pending();
    CHECK(after > before);
    CHECK(after <= before + (2u << 20));  // its share again on top of what it held
}

TEST_CASE("pipeline: a lane full until the end is said once as a warning in the shipper's own stream", "[shipper]") {
    jobtrail::test::TempDir d;
    auto c = config(d.path());
    c.shipper.spool_max_bytes = 4 << 20;
    c.shipper.nccl_budget_bytes = 0;
    Pipeline p(c, [](const SourceContext& ctx) {
        std::vector<std::unique_ptr<Source>> v;
        v.push_back(std::make_unique<FloodSource>(ctx.node, /*incompressible=*/true));
        return v;
    });
    CHECK(run_once(p, 5'000) == 2);
    const auto& pm = p.metrics().group<PipelineMetrics>();
    CHECK(pm.spool_full > 1);
    // Full from its first full pass to the end (its lines do not compress: no room comes back):
    // said once, however many passes it stayed full.
    CHECK(pm.events.value({"pipeline", "spool_full"}) == 1);
    // Shipped once in the shipper's own stream, worded as on stderr (no "pipeline: " for the
    // pipeline's own), and nothing else of the shipper's: its info stays on stderr.
    std::vector<std::string> own;
    for (const auto& [l, n] : spooled(d.path()))
        for (int i = 0; i < n; ++i) own.push_back(l);
    REQUIRE(own.size() == 1);
    CHECK(own[0].rfind("warning: spool lane 'jobs' is full (", 0) == 0);
    CHECK(own[0].ends_with(" bytes); its sources paused until Loki takes more"));
}

TEST_CASE("pipeline: a restart with nothing new keeps every spooled line, the checkpoint at the synced end",
          "[shipper]") {
    // The checkpoint is written after the spool is synced and names its end then: a restart cuts
    // the spool back to that end, so a checkpoint written first would name an older end and the
    // restart would cut lines whose sources have moved past them.
    jobtrail::test::TempDir d;
    const auto c = config(d.path());
    const Checkpoint cp = run_checkpointed(c, 100);
    {
        jobtrail::spool::Spool s;
        REQUIRE(s.open({d.path() + "/spool"}).ok);
        CHECK(*cp.end(Lane::kNode) == s.durable_end());
    }
    REQUIRE(run(c, 100) == 0);
    const auto lines = spooled(d.path());
    CHECK(lines.size() == 100);
    for (const auto& [l, n] : lines) CHECK(n == 1);
}

TEST_CASE("pipeline: a spool that cannot be cut back to the checkpoint stops the start and says which file",
          "[shipper]") {
    // Records spooled after the last checkpoint (a crash between the two) are cut at start: the
    // sources read them again. A segment that cannot be cut (a read-only file, a failing disk)
    // would send them twice: the shipper stops, saying what it could not do, for systemd to retry.
    jobtrail::test::TempDir d;
    const auto c = config(d.path());
    const Checkpoint cp = run_checkpointed(c, 100);
    const std::string seg = d.path() + "/spool/seg-" + [&] {
        char id[32];
        std::snprintf(id, sizeof id, "%016llu", static_cast<unsigned long long>(cp.end(Lane::kNode)->segment));
        return std::string(id);
    }();
    {
        // Spooled after the checkpoint: some in its segment, then more in the next one.
        jobtrail::spool::Spool s;
        REQUIRE(s.open({d.path() + "/spool"}).ok);
        REQUIRE(s.append(jobtrail::spool::Record{1, "{job=\"test\"}", "after", {}}) ==
                jobtrail::spool::Spool::Append::kOk);
        REQUIRE(s.sync());
        REQUIRE(s.open({d.path() + "/spool", 1}).ok);  // one byte a segment: the next append rolls over
        REQUIRE(s.append(jobtrail::spool::Record{2, "{job=\"test\"}", "next", {}}) ==
                jobtrail::spool::Spool::Append::kOk);
        REQUIRE(s.sync());
    }
    if (::mount(seg.c_str(), seg.c_str(), nullptr, MS_BIND, nullptr) != 0)
        JOBTRAIL_SKIP(std::string("cannot bind-mount here: ") + std::strerror(errno));
    const jobtrail::test::Unmount unmount{seg};
    // Read-only, keeping the flags a user namespace may not drop (nosuid, nodev...).
    struct statvfs vfs {};
    REQUIRE(::statvfs(seg.c_str(), &vfs) == 0);
    unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY;
    for (const auto& [st, ms] : {std::pair{ST_NOSUID, MS_NOSUID},
                                 {ST_NODEV, MS_NODEV},
                                 {ST_NOEXEC, MS_NOEXEC},
                                 {ST_NOATIME, MS_NOATIME},
                                 {ST_NODIRATIME, MS_NODIRATIME},
                                 {ST_RELATIME, MS_RELATIME}})
        if (vfs.f_flag & st) flags |= ms;
    if (::mount(nullptr, seg.c_str(), nullptr, flags, nullptr) != 0)
        JOBTRAIL_SKIP(std::string("cannot make a bind mount read-only here: ") + std::strerror(errno));
    int code = -1;
    uint64_t said = 0;
    const std::string err = jobtrail::test::captured(2, [&] {
        Pipeline p(c, [](const SourceContext& ctx) {
            std::vector<std::unique_ptr<Source>> v;
            v.push_back(std::make_unique<CountingSource>(100, ctx.node));
            return v;
        });
        code = run_once(p);
        said = p.metrics().group<PipelineMetrics>().events.value({"pipeline", "spool_recovery_failed"});
    });
    INFO(err);
    CHECK(code == 1);
    CHECK(said == 1);
    CHECK(err.find("cannot truncate " + seg + ": Read-only file system") != std::string::npos);
}

TEST_CASE("pipeline: a torn spool tail cut at start is said, a clean start says nothing", "[shipper]") {
    // A crash mid-write leaves half a frame: the next start cuts it and says so (stderr and
    // jobtrail_shipper_internal_events_total); an ordinary start says nothing of the kind.
    jobtrail::test::TempDir d;
    const auto c = config(d.path());
    auto recovered = [&] {  // runs --once, then how often the start said it recovered the spool
        Pipeline p(c, [](const SourceContext& ctx) {
            std::vector<std::unique_ptr<Source>> v;
            v.push_back(std::make_unique<CountingSource>(50, ctx.node));
            return v;
        });
        REQUIRE(run_once(p) == 0);
        return p.metrics().group<PipelineMetrics>().events.value({"pipeline", "spool_recovered"});
    };
    CHECK(recovered() == 0);
    CHECK(recovered() == 0);
    std::string last;
    for (const auto& e : std::filesystem::directory_iterator(d.path() + "/spool"))
        if (e.is_regular_file() && e.path().filename().string().starts_with("seg-") && e.path().string() > last)
            last = e.path().string();  // the node lane's newest segment
    REQUIRE(!last.empty());
    std::ofstream(last, std::ios::app) << std::string("\x01\x02\x03\x04\x05\x06\x07", 7);
    CHECK(recovered() == 1);
    CHECK(recovered() == 0);
    CHECK(spooled(d.path()).size() == 50);  // what was whole stays, each line once
}

namespace {

// Two files' lines, as an NCCL source gives them: each origin has news for its first line only.
class TwoFilesSource : public Source {
public:
    TwoFilesSource()
        : a_(make_origin({{"job", "nccl"}}, {}, jobtrail::node::StreamKind::kOther, "77", "0", {{"step", "0"}})),
          b_(make_origin({{"job", "nccl"}}, {}, jobtrail::node::StreamKind::kOther, "77", "1", {{"step", "1"}})) {}
    const std::string& name() const override { return name_; }
    bool poll(std::vector<Event>& out, size_t) override {
        // The first line of each is one the stages drop; "a" goes on in a second pass, 100, 500
        // and 700 seconds later.
        if (pass_ == 0)
            for (const char* l : {"a noise", "a 1", "b noise", "b 1"})
                out.push_back({1'700'000'000'000'000'000 + static_cast<int64_t>(out.size()),
                               l[0] == 'a' ? a_ : b_,
                               l,
                               {},
                               false});
        else if (pass_ == 1)
            for (const int64_t after : {100'000'000'000LL, 500'000'000'000LL, 700'000'000'000LL})
                out.push_back({1'700'000'000'000'000'000 + after,
                               a_,
                               "a at " + std::to_string(after / 1'000'000'000),
                               {},
                               false});
        return ++pass_ < 2;
    }
    nlohmann::json checkpoint() const override { return {{"pass", pass_}}; }
    void restore(const nlohmann::json&) override {}

private:
    std::string name_ = "two";
    int pass_ = 0;
    std::shared_ptr<const Origin> a_, b_;
};

// What a pipeline of TwoFilesSource under config c spooled.
std::vector<jobtrail::spool::Record> spooled_two_files(const jobtrail::config::Config& c, const std::string& dir) {
    Pipeline p(c, [](const SourceContext&) {
        std::vector<std::unique_ptr<Source>> v;
        v.push_back(std::make_unique<TwoFilesSource>());
        return v;
    });
    REQUIRE(run_once(p) == 0);
    jobtrail::spool::Spool s;
    REQUIRE(s.open({dir + "/spool"}));
    std::vector<jobtrail::spool::Record> all, recs;
    jobtrail::spool::Position end;
    while (s.read(recs, 1000, 1 << 20, end) > 0) all.insert(all.end(), recs.begin(), recs.end());
    return all;
}

}  // namespace

TEST_CASE("pipeline: an origin's first-line metadata goes on its first line the stages keep, then every ten minutes",
          "[shipper]") {
    jobtrail::test::TempDir d;
    auto c = config(d.path());
    c.shipper.drop = {{"noise", "noise"}};
    std::map<std::string, jobtrail::spool::Record> by_line;
    for (const auto& r : spooled_two_files(c, d.path()))
        if (r.line.size() > 2 && r.line[1] == ' ') by_line[r.line] = r;  // not the shipper's own
    const jobtrail::spool::RecordRef::Metadata none, step0 = {{"step", "0"}}, step1 = {{"step", "1"}};
    REQUIRE(by_line.size() == 5);
    CHECK(by_line["a 1"].metadata == step0);
    CHECK(by_line["a at 100"].metadata == none);
    CHECK(by_line["a at 500"].metadata == none);
    CHECK(by_line["a at 700"].metadata == step0);  // ten minutes after it was last said: again
    CHECK(by_line["b 1"].metadata == step1);
}

TEST_CASE("pipeline: for a Loki not sent structured metadata, none is spooled", "[shipper]") {
    // The spool's runs go out as they are: one holding metadata would have to be decompressed
    // and sent entry by entry to leave it out.
    jobtrail::test::TempDir d;
    auto c = config(d.path());
    c.shipper.structured_metadata = false;
    const auto recs = spooled_two_files(c, d.path());
    CHECK(recs.size() >= 5);
    for (const auto& r : recs) CHECK(r.metadata.empty());
}

namespace {

// "line <i>" for i in [next, end), and how often it was asked for more while the pipeline had a
// commit failing (its own count of spool_sync_failed, read on the pipeline's thread).
class WatchedSource : public Source {
public:
    WatchedSource(uint64_t end, const Pipeline* const* p)
        : end_(end), p_(p), origin_(make_origin({{"job", "test"}}, {}, jobtrail::node::StreamKind::kOther)) {}
    const std::string& name() const override { return name_; }
    bool poll(std::vector<Event>& out, size_t) override {
        const uint64_t failed = failures();
        if (failed > seen_failures_) ++polls_while_failing;
        seen_failures_ = failed;
        for (int i = 0; i < 500 && next_ < end_; ++i, ++next_)
            out.push_back({1'700'000'000'000'000'000 + static_cast<int64_t>(next_),
                           origin_,
                           "line " + std::to_string(next_) + noise(100, next_),
                           {},
                           false});
        return next_ < end_;
    }
    nlohmann::json checkpoint() const override { return {{"next", next_}}; }
    void restore(const nlohmann::json& s) override {
        if (s.contains("next")) next_ = s["next"].get<uint64_t>();
    }
    static inline int polls_while_failing = 0;

private:
    uint64_t failures() const {
        auto& m = const_cast<Pipeline*>(*p_)->metrics();
        return m.group<PipelineMetrics>().events.value({"pipeline", "spool_sync_failed"});
    }
    std::string name_ = "watched";
    uint64_t next_ = 0, end_;
    uint64_t seen_failures_ = 0;
    const Pipeline* const* p_;
    std::shared_ptr<const Origin> origin_;
};

}  // namespace

TEST_CASE("pipeline: a full disk stops reading until a commit succeeds, then every line is spooled once", "[shipper]") {
    jobtrail::test::TempDir d;
    const auto c = config(d.path());
    const Pipeline* self = nullptr;
    const auto make = [&self](const SourceContext&) {
        std::vector<std::unique_ptr<Source>> v;
        v.push_back(std::make_unique<WatchedSource>(20'000, &self));
        return v;
    };
    {
        Pipeline p(c, make);
        self = &p;
        // The disk "fills" at 256 KiB: a commit fails, and fails again at every try.
        WatchedSource::polls_while_failing = 0;
        int status = 0;
        {
            const jobtrail::test::FileSizeLimit full(256 << 10);
            status = run_once(p, 2'000);
        }
        CHECK(status == 2);  // --once ends by its timeout, not as if all were done
        CHECK(p.metrics().group<PipelineMetrics>().events.value({"pipeline", "spool_sync_failed"}) >= 2);
        // A source is asked again only after a successful commit: what it gave waits in memory
        // (one commit's worth), and the disk's being full holds the positions where they are.
        CHECK(WatchedSource::polls_while_failing == 0);
    }
    // With room again, the source resumes from the checkpoint: every line once.
    {
        Pipeline p(c, make);
        self = &p;
        REQUIRE(run_once(p) == 0);
    }
    const auto lines = spooled(d.path());
    size_t n = 0;
    for (const auto& [l, k] : lines) {
        if (l.rfind("line ", 0) != 0) continue;
        ++n;
        CHECK(k == 1);
    }
    CHECK(n == 20'000);
}

namespace {

// "fresh <i>" for i in [0, end), stamped now (Loki takes them), a few a pass; the bytes left to
// read are its backlog, and its first poll may fail.
class FreshSource : public Source {
public:
    FreshSource(uint64_t end, NodeInfo node, bool fail_first = false,
                jobtrail::node::StreamKind kind = jobtrail::node::StreamKind::kOther)
        : name_(kind == jobtrail::node::StreamKind::kNccl ? "nccl" : "fresh"),
          end_(end),
          fail_(fail_first),
          base_(jobtrail::realtime_ns() - 60'000'000'000),
          kind_(kind),
          origin_(make_origin({{"job", name_}, {"node", node.node}}, {}, kind,
                              kind == jobtrail::node::StreamKind::kNccl ? "4242" : "")) {}
    const std::string& name() const override { return name_; }
    jobtrail::node::StreamKind kind() const override { return kind_; }
    bool poll(std::vector<Event>& out, size_t) override {
        if (fail_) {
            fail_ = false;
            throw std::runtime_error("input went away");
        }
        for (int i = 0; i < 7 && next_ < end_; ++i, ++next_)
            out.push_back(
                {base_ + static_cast<int64_t>(next_), origin_, name_ + " " + std::to_string(next_), {}, false});
        return next_ < end_;
    }
    int64_t backlog_bytes() const override { return static_cast<int64_t>(end_ - next_) * 10; }
    nlohmann::json checkpoint() const override { return {{"next", next_}}; }
    void restore(const nlohmann::json& s) override {
        if (s.contains("next")) next_ = s["next"].get<uint64_t>();
    }

private:
    std::string name_;
    uint64_t next_ = 0, end_;
    bool fail_;
    int64_t base_;
    jobtrail::node::StreamKind kind_;
    std::shared_ptr<const Origin> origin_;
};

Pipeline::SourceFactory fresh(uint64_t lines, bool fail_first = false) {
    return [=](const SourceContext& ctx) {
        std::vector<std::unique_ptr<Source>> v;
        v.push_back(std::make_unique<FreshSource>(lines, ctx.node, fail_first));
        return v;
    };
}

uint64_t said(Pipeline& p, std::string_view event) {
    return p.metrics().group<PipelineMetrics>().events.value({"pipeline", std::string(event)});
}

}  // namespace

TEST_CASE("pipeline: every line read is counted read and spooled once and spooling only is said once", "[shipper]") {
    jobtrail::test::TempDir d;
    const auto c = config(d.path());
    Pipeline p(c, fresh(100));
    REQUIRE(run_once(p) == 0);
    const auto& pm = p.metrics().group<PipelineMetrics>();
    CHECK(pm.read == 100);
    CHECK(pm.spooled == 100);
    CHECK(said(p, "no_loki") == 1);
    // Said on stderr, an info: not shipped beside the logs.
    const auto lines = spooled(d.path());
    CHECK(lines.size() == 100);
    for (const auto& [l, n] : lines) {
        CHECK(l.rfind("fresh ", 0) == 0);
        CHECK(n == 1);
    }
    // A source read to its end shows no backlog, not the last it had.
    CHECK(pm.source_backlog_bytes.samples() == std::map<jobtrail::metrics::Labels, int64_t>{{{"fresh"}, 0}});
    // A scrape sees what the node lane holds for Loki.
    jobtrail::spool::Spool s;
    REQUIRE(s.open({d.path() + "/spool"}));
    REQUIRE(s.pending_bytes() > 0);
    const std::string text = p.render_metrics();
    CHECK(text.find("jobtrail_shipper_spool_lane_bytes{lane=\"node\"} " + std::to_string(s.pending_bytes()) + "\n") !=
          std::string::npos);
    // A source kind's counters are there though no source of it runs.
    CHECK(text.find("\njobtrail_shipper_cri_lines_cut_total 0\n") != std::string::npos);
}

TEST_CASE("pipeline: a pass whose source fails is said and tried again with no line lost", "[shipper]") {
    jobtrail::test::TempDir d;
    const auto c = config(d.path());
    Pipeline p(c, fresh(30, /*fail_first=*/true));
    REQUIRE(run_once(p) == 0);
    CHECK(said(p, "pass_failed") == 1);
    // Every line once, and the error beside them in the shipper's own stream.
    std::map<std::string, int> want;
    for (int i = 0; i < 30; ++i) want["fresh " + std::to_string(i)] = 1;
    want["error: a pass failed and is retried: input went away"] = 1;
    CHECK(spooled(d.path()) == want);
}

TEST_CASE("pipeline: a checkpoint that cannot be written is said and --once ends by its timeout not as done",
          "[shipper]") {
    jobtrail::test::TempDir d;
    // The checkpoint's path is a directory: the rename over it fails at every commit.
    std::filesystem::create_directories(d.path() + "/shipper-checkpoint.json/x");
    const auto c = config(d.path());
    Pipeline p(c, fresh(100));
    CHECK(run_once(p, 1'500) == 2);
    CHECK(said(p, "checkpoint_failed") >= 1);
    CHECK(p.metrics().group<PipelineMetrics>().spooled == 0);
}

TEST_CASE(
    "pipeline: a state directory it cannot make or a spool it cannot open or a state another shipper holds is said "
    "with exit 1",
    "[shipper]") {
    jobtrail::test::TempDir d;
    std::ofstream(d.path() + "/file") << "x";
    {
        auto c = config(d.path() + "/file/state");
        Pipeline p(c, fresh(10));
        CHECK(run_once(p) == 1);
        CHECK(said(p, "state_dir") == 1);
    }
    {
        auto c = config(d.path());
        c.shipper.spool_dir = d.path() + "/file";
        Pipeline p(c, fresh(10));
        CHECK(run_once(p) == 1);
        CHECK(said(p, "spool_open_failed") == 1);
    }
    {
        const auto held = jobtrail::lock_exclusive(d.path() + "/shipper.lock");
        REQUIRE(held.ok);
        const auto c = config(d.path());
        Pipeline p(c, fresh(10));
        CHECK(run_once(p) == 1);
        CHECK(said(p, "state_locked") == 1);
    }
}

TEST_CASE("pipeline: --once with Loki ends when Loki has every line once and the spool is all acknowledged",
          "[shipper]") {
    jobtrail::test::LokiDouble loki;
    jobtrail::test::TempDir d;
    auto c = config(d.path());
    c.shipper.loki_url = loki.url();
    {
        Pipeline p(c, fresh(200));
        REQUIRE(run_once(p) == 0);
    }
    jobtrail::loki::Endpoint ep;
    ep.url = loki.url();
    jobtrail::loki::Client client(ep);
    const auto store = nlohmann::json::parse(client.get("/-/store", "").body);
    std::map<std::string, int> lines;
    for (const auto& s : store)
        for (const auto& e : s["entries"]) ++lines[e[1].get<std::string>()];
    CHECK(lines.size() == 200);
    for (const auto& [l, n] : lines) {
        CHECK(l.rfind("fresh ", 0) == 0);
        CHECK(n == 1);
    }
    jobtrail::spool::Spool s;
    REQUIRE(s.open({d.path() + "/spool"}));
    CHECK(s.pending_bytes() == 0);
}

TEST_CASE("pipeline: what a lane holds from a configuration with sources it no longer has still goes to Loki",
          "[shipper]") {
    // NCCL logs spooled (jobs lane) while Loki was away, then NCCL collection turned off: the
    // jobs lane has no source left, and its lines go to Loki beside the node's.
    jobtrail::test::LokiDouble loki;
    jobtrail::test::TempDir d;
    auto c = config(d.path());
    {
        Pipeline p(c, [](const SourceContext& ctx) {
            std::vector<std::unique_ptr<Source>> v;
            v.push_back(std::make_unique<FreshSource>(50, ctx.node, false, jobtrail::node::StreamKind::kNccl));
            return v;
        });
        REQUIRE(run_once(p) == 0);
    }
    c.shipper.loki_url = loki.url();
    {
        Pipeline p(c, fresh(20));
        REQUIRE(run_once(p) == 0);
    }
    jobtrail::loki::Endpoint ep;
    ep.url = loki.url();
    jobtrail::loki::Client client(ep);
    std::map<std::string, int> lines;
    for (const auto& st : nlohmann::json::parse(client.get("/-/store", "").body))
        for (const auto& e : st["entries"]) ++lines[e[1].get<std::string>()];
    std::map<std::string, int> want;
    for (int i = 0; i < 50; ++i) want["nccl " + std::to_string(i)] = 1;
    for (int i = 0; i < 20; ++i) want["fresh " + std::to_string(i)] = 1;
    CHECK(lines == want);
    jobtrail::spool::Spool jobs;
    REQUIRE(jobs.open({d.path() + "/spool/jobs"}));
    CHECK(jobs.pending_bytes() == 0);
}

TEST_CASE(
    "pipeline: --once says what a job's NCCL budget dropped in the window still open with every line accounted for",
    "[shipper]") {
    jobtrail::test::TempDir d;
    auto c = config(d.path());
    c.shipper.nccl_budget_bytes = 100;  // a minute's window: still open when --once ends
    Pipeline p(c, [](const SourceContext& ctx) {
        std::vector<std::unique_ptr<Source>> v;
        v.push_back(std::make_unique<FreshSource>(50, ctx.node, false, jobtrail::node::StreamKind::kNccl));
        return v;
    });
    REQUIRE(run_once(p) == 0);
    jobtrail::spool::Spool jobs;
    REQUIRE(jobs.open({d.path() + "/spool/jobs"}));
    std::vector<jobtrail::spool::Record> recs;
    jobtrail::spool::Position end;
    size_t kept = 0, said = 0;
    uint64_t dropped = 0;
    while (jobs.read(recs, 1000, 1 << 20, end) > 0)
        for (const auto& r : recs) {
            if (r.line.rfind("nccl ", 0) == 0) ++kept;
            if (r.line.rfind("jobtrail dropped ", 0) == 0) {
                ++said;
                CHECK(r.line.find(" NCCL lines (") != std::string::npos);
                CHECK(r.line.find(" of job 4242 over its budget of ") != std::string::npos);
                dropped += std::stoull(r.line.substr(17));
            }
        }
    CHECK(kept > 0);
    CHECK(kept < 50);
    CHECK(said == 1);
    CHECK(kept + dropped == 50);
}

TEST_CASE("pipeline: --once leaves the metrics port alone: a running shipper's port taken is nothing to say",
          "[shipper]") {
    // The daemon holds shipper.metrics; a --once drain beside it neither binds nor complains.
    const int held = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(held >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(held, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(held, 1) == 0);
    REQUIRE(::getsockname(held, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    jobtrail::test::TempDir d;
    auto c = config(d.path());
    c.shipper.metrics_listen = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    Pipeline p(c, fresh(10));
    CHECK(run_once(p) == 0);
    CHECK(said(p, "metrics_listen_failed") == 0);
    ::close(held);
}

namespace {

// What `--dry-run` of config c with these sources printed on stdout, its exit status, and
// whether it had to be stopped: a dry run that does not end by itself (it went on shipping) is
// stopped after 60 s. stdout is put back whatever happens in the run.
struct DryRun {
    int status = -1;
    bool stopped = false;
    std::string printed;
};

DryRun dry_run(const jobtrail::config::Config& c, Pipeline::SourceFactory sources) {
    DryRun r;
    std::fflush(stdout);  // the reporter's pending output stays the reporter's
    const std::unique_ptr<FILE, int (*)(FILE*)> tmp(std::tmpfile(), &std::fclose);
    REQUIRE(tmp);
    {
        struct Restore {
            int saved = ::dup(1);
            ~Restore() {
                std::fflush(stdout);
                ::dup2(saved, 1);
                ::close(saved);
            }
        } restore;
        REQUIRE(restore.saved >= 0);
        ::dup2(::fileno(tmp.get()), 1);
        std::atomic<bool> stop{false};
        {
            std::jthread watchdog([&stop](std::stop_token ended) {
                std::mutex mu;
                std::condition_variable_any cv;
                std::unique_lock lk(mu);
                cv.wait_for(lk, ended, std::chrono::seconds(60), [] { return false; });
                if (!ended.stop_requested()) stop = true;
            });
            RunOptions o;
            o.dry_run = true;
            Pipeline p(c, std::move(sources));
            r.status = p.run(o, stop);
        }
        r.stopped = stop;
    }
    std::rewind(tmp.get());
    for (int ch; (ch = std::fgetc(tmp.get())) != EOF;) r.printed += static_cast<char>(ch);
    return r;
}

}  // namespace

TEST_CASE("pipeline: --dry-run prints the lines the stages keep with their time and stream and changes nothing",
          "[shipper]") {
    jobtrail::test::TempDir d;
    auto c = config(d.path());
    c.shipper.drop = {{"noise", "noise"}};
    const auto dry = dry_run(c, [](const SourceContext&) {
        std::vector<std::unique_ptr<Source>> v;
        v.push_back(std::make_unique<TwoFilesSource>());
        return v;
    });
    CHECK(dry.status == 0);
    CHECK_FALSE(dry.stopped);
    const std::string& printed = dry.printed;
    std::vector<std::string> ours;
    for (size_t at = 0, nl; (nl = printed.find('\n', at)) != std::string::npos; at = nl + 1)
        if (printed.compare(at + 31, 13, "{job=\"nccl\"} ") == 0) ours.push_back(printed.substr(at, nl - at));
    // The noise dropped; each file's first line kept says its step, and again ten minutes on.
    CHECK(ours == std::vector<std::string>{
                      "2023-11-14T22:13:20.000000001Z {job=\"nccl\"} a 1 |step=0",
                      "2023-11-14T22:13:20.000000003Z {job=\"nccl\"} b 1 |step=1",
                      "2023-11-14T22:15:00.000000000Z {job=\"nccl\"} a at 100",
                      "2023-11-14T22:21:40.000000000Z {job=\"nccl\"} a at 500",
                      "2023-11-14T22:25:00.000000000Z {job=\"nccl\"} a at 700 |step=0",
                  });
    // Nothing spooled, no position kept, no lock: a shipper running beside it is not disturbed.
    CHECK_FALSE(std::filesystem::exists(d.path() + "/spool"));
    CHECK_FALSE(std::filesystem::exists(d.path() + "/shipper-checkpoint.json"));
    CHECK_FALSE(std::filesystem::exists(d.path() + "/shipper.lock"));
}

TEST_CASE("pipeline: --dry-run starts where the running shipper's checkpoint stands and leaves it as it was",
          "[shipper]") {
    jobtrail::test::TempDir d;
    const auto c = config(d.path());
    REQUIRE(run(c, 3) == 0);  // lines 0 to 2 shipped for real
    const std::string checkpoint = d.path() + "/shipper-checkpoint.json";
    const auto before = jobtrail::read_small_file(checkpoint);
    REQUIRE(before);
    const auto dry = dry_run(c, [](const SourceContext& ctx) {
        std::vector<std::unique_ptr<Source>> v;
        v.push_back(std::make_unique<CountingSource>(5, ctx.node));
        return v;
    });
    CHECK(dry.status == 0);
    CHECK_FALSE(dry.stopped);
    const std::string& printed = dry.printed;
    CHECK(printed.find(" line 2\n") == std::string::npos);
    CHECK(printed.find(" line 3\n") != std::string::npos);
    CHECK(printed.find(" line 4\n") != std::string::npos);
    CHECK(jobtrail::read_small_file(checkpoint) == before);
    const auto spool = spooled(d.path());
    CHECK(spool.count("line 2") == 1);
    CHECK(spool.count("line 3") == 0);  // printed, not spooled
}

TEST_CASE("pipeline: --dry-run prints a file's last line that has no newline yet", "[shipper]") {
    jobtrail::test::TempDir d;
    const auto c = config(d.path());
    const std::string log = d.path() + "/job.log";
    std::ofstream(log) << "first\nlast without its newline";
    const auto dry = dry_run(c, [&log](const SourceContext& ctx) {
        std::vector<std::unique_ptr<Source>> v;
        v.push_back(std::make_unique<FileSource>(FileSourceConfig{"t", {log}, "test", LineFormat::kPlain, {}},
                                                 FileSourceOptions::of(ctx), ctx.metrics));
        return v;
    });
    CHECK(dry.status == 0);
    CHECK_FALSE(dry.stopped);
    const std::string& printed = dry.printed;
    CHECK(printed.find(" first\n") != std::string::npos);
    CHECK(printed.find(" last without its newline\n") != std::string::npos);
}
