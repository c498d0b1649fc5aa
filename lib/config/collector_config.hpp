#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "node/layout.hpp"

namespace jobtrail::config {

// A command a collector runs and records, e.g. nvidia-smi. "{job_id}" in an argument is
// replaced by the job id. A program that is not installed is recorded as skipped.
struct Probe {
    std::string name;
    std::vector<std::string> argv;
    int64_t timeout_ms = 10'000;
};

// What one collector (prolog or epilog) wraps and records.
struct PhaseConfig {
    // Site scripts: paths or globs, each glob's matches run in reverse alphabetical order and
    // the run stops at the first failure, as slurmd does with a globbed Prolog=/Epilog=.
    std::vector<std::string> scripts;
    int64_t script_timeout_ms = 300'000;
    int64_t total_timeout_ms = 600'000;
    std::vector<Probe> probes;
    // Epilog only: fail (so Slurm drains the node) when one of these Xids appeared during the job.
    std::vector<int> fail_on_xid;
};

struct CollectorConfig {
    std::string log_dir{node::kDefaultLogDir};  // prolog/<jobid>.log and epilog/<jobid>.log go below
    std::string state_dir{node::kDefaultStateDir};
    std::string run_dir{node::kDefaultRunDir};
    std::string nccl_dir;  // the plugin's nccl_dir; empty: <log_dir>/nccl
    std::string kmsg_path = "/dev/kmsg";
    // The driver's view of the GPUs (gpus/<bdf>/information): the prolog maps the job's
    // SLURM_JOB_GPUS to PCI addresses with it. Tests point it at a fixture tree.
    std::string nvidia_proc = "/proc/driver/nvidia";
    // Prints the node's GRES with their device files: SLURM_JOB_GPUS holds positions in that
    // list, not device minors. Run by the prolog of a job with GPUs, under a 5 s bound.
    std::vector<std::string> gres_command{"slurmd", "-G"};
    // PATH for site scripts and probes: slurmd gives Prolog/Epilog none.
    std::string path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    // Kernel context kept in the prolog log: at most this many records, none older than this.
    int context_records = 200;
    int64_t context_ms = 600'000;
    uint64_t max_log_bytes = 32ULL << 20;
    uint64_t max_line_bytes = 64ULL << 10;
    int64_t kill_grace_ms = 1'000;   // SIGTERM to SIGKILL for a timed-out process group
    int64_t kmsg_budget_ms = 2'000;  // upper bound on time spent reading the kernel ring
    // Where Slurm makes its jobs' cgroups: an OOM kill is a job's only in <root>/job_<id> (or
    // <root>/uid_<uid>/job_<id>, cgroup v1) and only when the kernel's uid= is the job's user.
    std::vector<std::string> slurm_cgroup_roots{"/system.slice/slurmstepd.scope", "/slurm"};
    PhaseConfig prolog;
    PhaseConfig epilog;
    // The node contract's paths, from the directories above.
    node::Layout layout() const;
};

CollectorConfig default_collector_config();

}  // namespace jobtrail::config
