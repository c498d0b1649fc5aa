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
