#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace jobtrail::collector {

// What Slurm tells a Prolog/Epilog about the job, through its environment.
struct JobFacts {
    std::string job_id;  // SLURM_JOB_ID; empty when not run by slurmd
    std::string user, uid, gid, partition, node, cluster, nodelist, work_dir, restart_count;
    std::string gpus;       // SLURM_JOB_GPUS
    std::string exit_code;  // epilog: SLURM_JOB_EXIT_CODE2 ("exit:signal")
    std::string trace;      // trace capture requested through the SPANK plugin, empty if none
    std::vector<std::pair<std::string, std::string>> spank;  // every SPANK_* variable

    bool valid_job_id() const;  // digits only (it becomes a file name)
};

// Reads the facts from the environment; cluster/node overrides come from the config.
JobFacts job_facts_from_env(const std::string& cluster_override, const std::string& node_override);

// key=value pairs for the log header, in a stable order, empty values left out.
std::vector<std::pair<std::string, std::string>> header_fields(const JobFacts& f);

}  // namespace jobtrail::collector
