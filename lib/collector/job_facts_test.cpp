#include "collector/job_facts.hpp"

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

using namespace jobtrail::collector;

namespace {

// Sets (or with nullptr unsets) environment variables for one test, and puts them back after.
class Env {
public:
    Env(std::initializer_list<std::pair<const char*, const char*>> vars) {
        for (const auto& [k, v] : vars) {
            const char* old = std::getenv(k);
            saved_.emplace(k, old ? std::optional<std::string>(old) : std::nullopt);
            if (v)
                ::setenv(k, v, 1);
            else
                ::unsetenv(k);
        }
    }
    ~Env() {
        for (const auto& [k, v] : saved_) {
            if (v)
                ::setenv(k.c_str(), v->c_str(), 1);
            else
                ::unsetenv(k.c_str());
        }
    }
    Env(const Env&) = delete;
    Env& operator=(const Env&) = delete;

private:
    std::map<std::string, std::optional<std::string>> saved_;
};

using Fields = std::vector<std::pair<std::string, std::string>>;

Fields without_spank(Fields f) {
    std::erase_if(f, [](const auto& kv) { return kv.first.starts_with("SPANK_"); });
    return f;
}

Fields spank_only(const Fields& f) {
    Fields out;
    for (const auto& kv : f)
        if (kv.first.starts_with("SPANK_")) out.push_back(kv);
    return out;
}

}  // namespace

TEST_CASE("a prolog's header holds every job fact Slurm gave in a fixed order and every SPANK variable sorted",
          "[collector]") {
    const Env env({{"SLURM_JOB_ID", "4242"},
                   {"SLURM_JOB_USER", "alice"},
                   {"SLURM_JOB_UID", "1000"},
                   {"SLURM_JOB_GID", "100"},
                   {"SLURM_JOB_PARTITION", "gpu"},
                   {"SLURMD_NODENAME", "gpu017"},
                   {"SLURM_CLUSTER_NAME", "hpc"},
                   {"SLURM_JOB_NODELIST", "gpu[017-018]"},
                   {"SLURM_JOB_WORK_DIR", "/home/alice"},
                   {"SLURM_JOB_RESTART_COUNT", "1"},
                   {"SLURM_JOB_GPUS", "0,1"},
                   {"SLURM_JOB_EXIT_CODE2", "0:0"},
                   {"SPANK_JOBTRAIL_TRACE", "INFO:NET"},
                   {"SPANK_ZZ_TEST", "last=1"},
                   {"SPANK_AA_TEST", "first"}});
    const auto f = job_facts_from_env("", "");
    CHECK(f.valid_job_id());
    const Fields h = header_fields(f);
    CHECK(without_spank(h) == Fields{{"job_id", "4242"},
                                     {"user", "alice"},
                                     {"uid", "1000"},
                                     {"gid", "100"},
                                     {"partition", "gpu"},
                                     {"node", "gpu017"},
                                     {"cluster", "hpc"},
                                     {"nodelist", "gpu[017-018]"},
                                     {"work_dir", "/home/alice"},
                                     {"restart_count", "1"},
                                     {"gpus", "0,1"},
                                     {"job_exit", "0:0"},
                                     {"trace", "INFO:NET"}});
    const Fields spank = spank_only(h);
    REQUIRE(spank.size() >= 3);
    CHECK(std::is_sorted(spank.begin(), spank.end()));
    CHECK(spank.front() == std::pair<std::string, std::string>{"SPANK_AA_TEST", "first"});
    CHECK(spank.back() == std::pair<std::string, std::string>{"SPANK_ZZ_TEST", "last=1"});
    CHECK(std::count(spank.begin(), spank.end(),
                     std::pair<std::string, std::string>{"SPANK_JOBTRAIL_TRACE", "INFO:NET"}) == 1);
}

TEST_CASE("job facts fall back to Slurm's older names and the configured cluster and node win", "[collector]") {
    const Env env({{"SLURM_JOB_ID", nullptr},
                   {"SLURM_JOBID", "77"},
                   {"SLURM_JOB_UID", nullptr},
                   {"SLURM_UID", "1001"},
                   {"SLURM_JOB_NODELIST", nullptr},
                   {"SLURM_NODELIST", "n[1-2]"},
                   {"SLURMD_NODENAME", "slurm-name"},
                   {"SLURM_CLUSTER_NAME", "slurm-cluster"},
                   {"SPANK_JOBTRAIL_TRACE", nullptr},
                   {"SPANK__SLURM_SPANK_OPTION_jobtrail_trace_capture", "ALL"}});
    const auto f = job_facts_from_env("site", "node9");
    CHECK(f.job_id == "77");
    CHECK(f.uid == "1001");
    CHECK(f.nodelist == "n[1-2]");
    CHECK(f.cluster == "site");
    CHECK(f.node == "node9");
    CHECK(f.trace == "ALL");
}

TEST_CASE("without Slurm's node name the host name is the node and what Slurm left out is left out", "[collector]") {
    const Env env({{"SLURMD_NODENAME", nullptr},
                   {"SLURM_JOB_USER", nullptr},
                   {"SLURM_JOB_GPUS", nullptr},
                   {"SPANK_JOBTRAIL_TRACE", nullptr},
                   {"SPANK__SLURM_SPANK_OPTION_jobtrail_trace_capture", nullptr}});
    char host[256] = {};
    REQUIRE(::gethostname(host, sizeof host - 1) == 0);
    const auto f = job_facts_from_env("", "");
    CHECK(f.node == host);
    CHECK(f.trace.empty());

    JobFacts only;
    only.job_id = "5";
    CHECK(header_fields(only) == Fields{{"job_id", "5"}, {"trace", "none"}});
}
