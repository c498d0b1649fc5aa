#include "collector/job_facts.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "node/env.hpp"
#include "node/layout.hpp"

extern char** environ;

namespace jobtrail::collector {
namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

std::string first_env(std::initializer_list<const char*> names) {
    for (const char* n : names)
        if (auto v = env(n); !v.empty()) return v;
    return "";
}

}  // namespace

bool JobFacts::valid_job_id() const {
    return node::valid_job_id(job_id);
}

JobFacts job_facts_from_env(const std::string& cluster_override, const std::string& node_override) {
    JobFacts f;
    f.job_id = first_env({"SLURM_JOB_ID", "SLURM_JOBID"});
    f.user = env("SLURM_JOB_USER");
    f.uid = first_env({"SLURM_JOB_UID", "SLURM_UID"});
    f.gid = env("SLURM_JOB_GID");
    f.partition = env("SLURM_JOB_PARTITION");
    f.node = node_override.empty() ? env("SLURMD_NODENAME") : node_override;
    if (f.node.empty()) {
        char host[256] = {};
        if (::gethostname(host, sizeof host - 1) == 0) f.node = host;
    }
    f.cluster = cluster_override.empty() ? env("SLURM_CLUSTER_NAME") : cluster_override;
    f.nodelist = first_env({"SLURM_JOB_NODELIST", "SLURM_NODELIST"});
    f.work_dir = env("SLURM_JOB_WORK_DIR");
    f.restart_count = env("SLURM_JOB_RESTART_COUNT");
    f.gpus = env("SLURM_JOB_GPUS");
    f.exit_code = env("SLURM_JOB_EXIT_CODE2");
    f.trace = first_env({node::env::kTraceProlog, node::env::kTraceOption});
    const size_t plen = std::strlen(node::env::kSpankPrefix);
    for (char** e = environ; e && *e; ++e) {
        if (std::strncmp(*e, node::env::kSpankPrefix, plen) != 0) continue;
        const char* eq = std::strchr(*e, '=');
        if (!eq) continue;
        f.spank.emplace_back(std::string(*e, static_cast<size_t>(eq - *e)), std::string(eq + 1));
    }
    std::sort(f.spank.begin(), f.spank.end());
    return f;
}

std::vector<std::pair<std::string, std::string>> header_fields(const JobFacts& f) {
    std::vector<std::pair<std::string, std::string>> out;
    auto add = [&](const char* k, const std::string& v) {
        if (!v.empty()) out.emplace_back(k, v);
    };
    add("job_id", f.job_id);
    add("user", f.user);
    add("uid", f.uid);
    add("gid", f.gid);
    add("partition", f.partition);
    add("node", f.node);
    add("cluster", f.cluster);
    add("nodelist", f.nodelist);
    add("work_dir", f.work_dir);
    add("restart_count", f.restart_count);
    add("gpus", f.gpus);
    add("job_exit", f.exit_code);
    out.emplace_back("trace", f.trace.empty() ? "none" : f.trace);
    for (const auto& [k, v] : f.spank) out.emplace_back(k, v);
    return out;
}

}  // namespace jobtrail::collector
