#include "shipper/stages/stages.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "kmsgfs_mount.hpp"

using namespace jobtrail::shipper;

namespace {
Event ev(std::string job, std::string line, std::string job_id = "", int64_t ts = 2000) {
    Event e;
    e.ts_ns = ts;
    jobtrail::loki::LabelSet labels = {{"job", job}};
    if (!job_id.empty()) labels["job_id"] = job_id;
    e.origin = make_origin(std::move(labels));
    e.line = std::move(line);
    return e;
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
    Stages st(cfg, run.path(), m);
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
