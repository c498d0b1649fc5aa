#include "collector/scripts.hpp"

#include <catch2/catch.hpp>
#include <fstream>

#include "temp_dir.hpp"

using namespace jobtrail::collector;

TEST_CASE("globbed scripts run in reverse alphabetical order, like slurmd", "[collector]") {
    jobtrail::test::TempDir dir;
    for (const char* n : {"10-first.sh", "20-second.sh", "05-zero.sh"})
        std::ofstream(dir.path() + "/" + n) << "#!/bin/sh\n";
    std::vector<std::string> errors;
    auto v = expand_scripts({dir.path() + "/*", dir.path() + "/missing-*"}, errors);
    CHECK(errors.empty());
    REQUIRE(v.size() == 3);
    CHECK(v[0] == dir.path() + "/20-second.sh");
    CHECK(v[2] == dir.path() + "/05-zero.sh");
}

TEST_CASE("job facts come from Slurm's Prolog environment", "[collector]") {
    ::setenv("SLURM_JOB_ID", "4242", 1);
    ::setenv("SLURM_JOB_USER", "alice", 1);
    ::setenv("SLURMD_NODENAME", "gpu017", 1);
    ::setenv("SPANK_JOBTRAIL_TRACE", "INFO:NET", 1);
    auto f = job_facts_from_env("", "");
    CHECK(f.valid_job_id());
    CHECK(f.job_id == "4242");
    CHECK(f.node == "gpu017");
    CHECK(f.trace == "INFO:NET");
    bool has = false;
    for (auto& [k, v] : header_fields(f)) has = has || (k == "SPANK_JOBTRAIL_TRACE" && v == "INFO:NET");
    CHECK(has);
    ::setenv("SLURM_JOB_ID", "../../etc/passwd", 1);
    CHECK_FALSE(job_facts_from_env("", "").valid_job_id());
    for (const char* v : {"SLURM_JOB_ID", "SLURM_JOB_USER", "SLURMD_NODENAME", "SPANK_JOBTRAIL_TRACE"}) ::unsetenv(v);
}
