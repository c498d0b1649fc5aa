#include "shipper/stages/stages.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "kmsgfs_mount.hpp"
#include "node/job_state.hpp"

using namespace jobtrail::shipper;

namespace {
using jobtrail::node::Stream;

// An event as the sources make it: the kind of stream comes from the source, not the label.
Event ev(std::string job, std::string line, std::string job_id = "", int64_t ts = 2000, std::string step = "") {
    Event e;
    e.ts_ns = ts;
    jobtrail::loki::LabelSet labels = {{"job", job}};
    if (!job_id.empty()) labels["job_id"] = job_id;
    const Stream kind = job.find("nccl") != std::string::npos   ? Stream::kNccl
                        : job.find("kmsg") != std::string::npos ? Stream::kKernel
                                                                : Stream::kOther;
    e.origin = make_origin(std::move(labels), {}, kind, job_id, step);
    e.line = std::move(line);
    return e;
}

jobtrail::node::Layout layout(const std::string& run_dir) {
    jobtrail::node::Layout l;
    l.run_dir = run_dir;
    return l;
}
}  // namespace

TEST_CASE("stages: blank lines, drop rules, NCCL noise, running jobs on kernel records", "[shipper]") {
    jobtrail::test::TempDir run;
    ::mkdir((run.path() + "/jobs").c_str(), 0755);
    std::ofstream(run.path() + "/jobs/10") << R"({"job_id":"10","start_ns":1000,"trace":""})";
    std::ofstream(run.path() + "/jobs/11") << R"({"job_id":"11","start_ns":1500,"trace":"INFO"})";
    std::ofstream(run.path() + "/jobs/12") << R"({"job_id":"12","start_ns":5000,"trace":""})";
    auto cfg = jobtrail::config::default_shipper_config();
    cfg.drop = {{"healthcheck", "GET /health"}};
    Metrics m;
    Stages st(cfg, layout(run.path()), m);
    std::vector<Event> e = {ev("app", "   "),
                            ev("app", "GET /health 200"),
                            ev("nccl", "gpu:1:1 [0] NCCL INFO Channel 00/02 : 0 1", "10"),
                            ev("nccl", "gpu:1:1 [0] NCCL INFO Channel 00/02 : 0 1", "11"),
                            ev("nccl", "gpu:1:1 [0] NCCL INFO Channel 00/02 : 0 1", "99"),
                            ev("nccl", "gpu:1:1 [0] NCCL WARN NET/IB : error", "10"),
                            ev("kmsg", "NVRM: Xid ...")};
    st.apply(e);
    CHECK(e[0].dropped);
    CHECK(e[1].dropped);
    CHECK(e[2].dropped);        // job 10 did not ask for trace
    CHECK_FALSE(e[3].dropped);  // job 11 did
    CHECK_FALSE(e[4].dropped);  // unknown job: kept
    CHECK_FALSE(e[5].dropped);  // warnings always
    REQUIRE(e[6].metadata.size() == 1);
    CHECK(e[6].metadata[0] == std::make_pair(std::string("slurm_job_id"), std::string("10,11")));
    CHECK(m.dropped.at("healthcheck") == 1);
    CHECK(m.dropped.at("nccl_noise") == 1);
}

TEST_CASE("stages key on the kind of stream: a renamed `job` and a step's own trace request", "[shipper]") {
    jobtrail::test::TempDir run;
    const auto l = layout(run.path());
    REQUIRE(jobtrail::node::write_job_marker(l, {"20", "u", "1000", "n", "", 1000}).ok);
    // The job did not ask for trace capture; its step 1 did (srun --trace-capture inside it).
    REQUIRE(jobtrail::node::write_step_record(l, {"20", "1", "INFO", 1100, ""}).ok);
    REQUIRE(jobtrail::node::write_step_record(l, {"20", "2", "none", 1100, ""}).ok);
    auto cfg = jobtrail::config::default_shipper_config();
    Metrics m;
    Stages st(cfg, l, m);
    const std::string info = "gpu:1:1 [0] NCCL INFO Channel 00/02 : 0 1";
    std::vector<Event> e = {ev("gpu-nccl", info, "20", 2000, "0"), ev("gpu-nccl", info, "20", 2000, "1"),
                            ev("gpu-nccl", info, "20", 2000, "2"), ev("gpu-kmsg", "NVRM: Xid ...")};
    st.apply(e);
    CHECK(e[0].dropped);        // step 0: the job's request (none)
    CHECK_FALSE(e[1].dropped);  // step 1 asked
    CHECK(e[2].dropped);
    REQUIRE(e[3].metadata.size() == 1);
    CHECK(e[3].metadata[0].second == "20");
}

TEST_CASE("stages: a job's NCCL lines past its budget are dropped, counted and said once per window in its stream",
          "[shipper]") {
    jobtrail::test::TempDir run;
    auto cfg = jobtrail::config::default_shipper_config();
    cfg.nccl_budget_bytes = 1310;  // ten lines of 99 bytes, each with 32 of framing
    cfg.nccl_budget_window_ms = 60'000;
    Metrics m;
    int64_t now = 1'000'000'000;
    Stages st(cfg, layout(run.path()), m, [&] { return now; });
    const std::string line(99, 'x');
    std::vector<Event> e;
    for (int i = 0; i < 30; ++i) e.push_back(ev("nccl", line, "4242", 3000 + i));
    for (int i = 0; i < 5; ++i) e.push_back(ev("nccl", line, "4343", 3000 + i));  // another job: its own budget
    e.push_back(ev("kmsg", "mlx5_core 0000:3b:00.0: port down"));
    st.apply(e);
    size_t kept_4242 = 0, kept_4343 = 0;
    for (const auto& x : e) {
        if (x.dropped) continue;
        if (x.origin->job_id == "4242") ++kept_4242;
        if (x.origin->job_id == "4343") ++kept_4343;
    }
    CHECK(kept_4242 == 10);
    CHECK(kept_4343 == 5);
    CHECK_FALSE(e.back().dropped);  // the kernel is never held to a job's budget
    CHECK(m.dropped["nccl_budget"] == 20);

    // Nothing is said before the window is over.
    std::vector<Event> said;
    st.flush(said);
    CHECK(said.empty());

    now += 61'000'000'000;
    st.flush(said);
    REQUIRE(said.size() == 1);
    CHECK(said[0].line ==
          "jobtrail dropped 20 NCCL lines (1980 bytes) of job 4242 over its budget of 1310 bytes per 1m on this node "
          "(shipper.stages.nccl_budget)");
    CHECK(said[0].origin->label("job") == "nccl");
    CHECK(said[0].origin->label("job_id") == "4242");
    CHECK(said[0].origin->kind == Stream::kNccl);

    // A new window: the job has its budget again, and a window without drops says nothing.
    std::vector<Event> next = {ev("nccl", line, "4242")};
    st.apply(next);
    CHECK_FALSE(next[0].dropped);
    now += 61'000'000'000;
    said.clear();
    st.flush(said);
    CHECK(said.empty());
}

TEST_CASE("stages: the NCCL budget's window is the shipper's clock, not the lines' own timestamps", "[shipper]") {
    jobtrail::test::TempDir run;
    auto cfg = jobtrail::config::default_shipper_config();
    cfg.nccl_budget_bytes = 164;  // two lines of 50 bytes and their framing
    Metrics m;
    const int64_t now = 5'000'000'000;
    Stages st(cfg, layout(run.path()), m, [&] { return now; });
    // A user stamping each line an hour apart does not get a fresh budget per line.
    std::vector<Event> e;
    for (int i = 0; i < 10; ++i) e.push_back(ev("nccl", std::string(50, 'y'), "7", int64_t(i) * 3'600'000'000'000));
    st.apply(e);
    size_t kept = 0;
    for (const auto& x : e) kept += !x.dropped;
    CHECK(kept == 2);
}

TEST_CASE("stages: no NCCL budget when its bytes are 0", "[shipper]") {
    jobtrail::test::TempDir run;
    auto cfg = jobtrail::config::default_shipper_config();
    cfg.nccl_budget_bytes = 0;
    Metrics m;
    Stages st(cfg, layout(run.path()), m);
    std::vector<Event> e;
    for (int i = 0; i < 1000; ++i) e.push_back(ev("nccl", std::string(1000, 'z'), "8"));
    st.apply(e);
    for (const auto& x : e) CHECK_FALSE(x.dropped);
}

TEST_CASE("stages: a kernel record read just after its job's epilog removed the marker still names that job",
          "[shipper]") {
    jobtrail::test::TempDir run;
    const auto l = layout(run.path());
    REQUIRE(jobtrail::node::write_job_marker(l, {"30", "u", "1000", "n", "", 1000}).ok);
    REQUIRE(jobtrail::node::write_job_marker(l, {"31", "u", "1000", "n", "", 1000}).ok);
    auto cfg = jobtrail::config::default_shipper_config();
    Metrics m;
    int64_t now = 5000;
    Stages st(cfg, l, m, {}, [&] { return now; });
    std::vector<Event> none;
    st.apply(none);  // both markers seen
    // Job 30 ends at 6000: its epilog removes the marker; the shipper notices at 6000.
    REQUIRE(::unlink((run.path() + "/jobs/30").c_str()) == 0);
    now = 6000;
    st.apply(none);
    // An Xid the kernel logged at 5990, read after that: still job 30's (and 31's, running).
    // One logged after the shipper saw the marker gone is not job 30's.
    now = 7000;
    std::vector<Event> e = {ev("kmsg", "NVRM: Xid (PCI:0000:3b:00): 79, pid=1", "", 5990),
                            ev("kmsg", "NVRM: Xid (PCI:0000:3b:00): 79, pid=1", "", 6500),
                            ev("kmsg", "NVRM: Xid (PCI:0000:3b:00): 79, pid=1", "", 900)};
    st.apply(e);
    REQUIRE(e[0].metadata.size() == 1);
    CHECK(e[0].metadata[0].second == "30,31");
    REQUIRE(e[1].metadata.size() == 1);
    CHECK(e[1].metadata[0].second == "31");
    CHECK(e[2].metadata.empty());  // before either job started
}

TEST_CASE("stages: one-byte NCCL lines with long metadata pay for the metadata, a stopping shipper says its drops",
          "[shipper]") {
    jobtrail::test::TempDir run;
    auto cfg = jobtrail::config::default_shipper_config();
    cfg.nccl_budget_bytes = 10'000;
    Metrics m;
    int64_t now = 1'000'000'000;
    Stages st(cfg, layout(run.path()), m, [&] { return now; });
    const auto origin = make_origin({{"job", "nccl"}, {"job_id", "9"}},
                                    {{"file", "0." + std::string(230, 'h') + ".1.log"}}, Stream::kNccl, "9");
    std::vector<Event> e;
    for (int i = 0; i < 1000; ++i) e.push_back({1, origin, "7", {}, false});
    st.apply(e);
    size_t kept = 0;
    for (const auto& x : e) kept += !x.dropped;
    CHECK(kept == 10'000 / (32 + 1 + 4 + 238));  // line, framing, and the file name it carries
    // The window is still open: nothing said, unless the shipper is stopping.
    std::vector<Event> said;
    st.flush(said);
    CHECK(said.empty());
    st.flush(said, /*all=*/true);
    REQUIRE(said.size() == 1);
    CHECK(said[0].line.rfind("jobtrail dropped " + std::to_string(1000 - kept) + " NCCL lines (", 0) == 0);
}

TEST_CASE("stages: an NCCL file whose name gives no job does not spend another job's budget", "[shipper]") {
    jobtrail::test::TempDir run;
    auto cfg = jobtrail::config::default_shipper_config();
    cfg.nccl_budget_bytes = 1000;
    Metrics m;
    Stages st(cfg, layout(run.path()), m, [] { return int64_t{1'000'000'000}; });
    std::vector<Event> e;
    for (int i = 0; i < 100; ++i) e.push_back(ev("nccl", std::string(100, 'q')));  // no job id
    e.push_back(ev("nccl", "NCCL WARN real trouble", "4243"));
    st.apply(e);
    CHECK_FALSE(e.back().dropped);
}
