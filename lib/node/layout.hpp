#pragma once

#include <optional>
#include <string>
#include <string_view>

// The node contract: every path that crosses a process boundary on a compute node, who owns it
// and how it is opened. The plugin, the collectors, the shipper and the CLI ask this; none spells
// a path itself.
//
// clang-format off
// | path                                       | owner                | written by              | opened by readers as        |
// |--------------------------------------------|----------------------|-------------------------|-----------------------------|
// | <log_dir>/{prolog,epilog}/<jobid>.log      | root, 0640           | collectors              | root's file                 |
// | <nccl_dir>/<jobid>/                        | the job's user, 0700 | job steps               | user-owned: open_read_safe  |
// | <nccl_dir>/<jobid>/.jobtrail-job           | root, 0444           | plugin                  | user-owned dir: O_NOFOLLOW|O_NONBLOCK |
// | <run_dir>/jobs/<jobid>                     | root, 0644           | prolog (epilog removes) | root's file                 |
// | <run_dir>/ended/<jobid>                    | root, 0644           | epilog (keeps an hour)  | root's file                 |
// | <run_dir>/steps/<jobid>.<step>             | root, 0644           | plugin (epilog removes) | root's file                 |
// | <state_dir>/kmsg-marks/<jobid>             | root                 | prolog                  | root's file                 |
// | <state_dir>/spool, shipper-checkpoint.json | root                 | shipper                 | root's file                 |
// clang-format on
namespace jobtrail::node {

inline constexpr std::string_view kDefaultLogDir = "/var/log/slurm";
inline constexpr std::string_view kDefaultNcclDir = "/var/log/slurm/nccl";
inline constexpr std::string_view kDefaultRunDir = "/run/jobtrail";
inline constexpr std::string_view kDefaultStateDir = "/var/lib/jobtrail";

// Who may have put a file there: decides how it is opened (see the table).
enum class Owner { kRoot, kJobUser };

enum class Phase { kProlog, kEpilog };
std::string_view phase_name(Phase p);
// "prolog" / "epilog" only: a value read back from Loki or a path is checked against these.
bool parse_phase(std::string_view s, Phase& out);

// Slurm job ids as the collectors record them (SLURM_JOB_ID: digits only, at most 20); anything
// else would reach file names, paths and queries. Array and het forms (123_4, 123+1) are refused:
// the records carry the raw job id that squeue -o %A or sacct -o JobIDRaw shows.
bool valid_job_id(std::string_view id);

struct Layout {
    std::string log_dir{kDefaultLogDir};
    std::string nccl_dir{kDefaultNcclDir};
    std::string run_dir{kDefaultRunDir};
    std::string state_dir{kDefaultStateDir};

    std::string job_log_dir(Phase p) const;
    std::string job_log(Phase p, const std::string& job_id) const;
    // A glob over both phases' logs, for the shipper's default source.
    std::string job_logs_glob() const;
    std::string nccl_job_dir(const std::string& job_id) const;
    std::string nccl_files_glob() const;
    std::string jobs_dir() const;
    std::string job_marker(const std::string& job_id) const;
    // <run_dir>/ended/<jobid>: the marker of a job that ended here, with its end time (epilog).
    std::string ended_dir() const;
    std::string ended_marker(const std::string& job_id) const;
    std::string steps_dir() const;
    std::string step_record(const std::string& job_id, const std::string& step) const;
    std::string kmsg_marks_dir() const;
    std::string kmsg_mark(const std::string& job_id) const;
};

// .../{prolog,epilog}/<jobid>.log back into its phase and job id.
struct JobLogName {
    Phase phase;
    std::string job_id;
};
std::optional<JobLogName> parse_job_log(std::string_view path);

// Where a job's NCCL directory is stamped with the job's identity by the plugin.
inline constexpr std::string_view kNcclDirStamp = ".jobtrail-job";

}  // namespace jobtrail::node
