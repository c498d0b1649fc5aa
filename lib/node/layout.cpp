#include "node/layout.hpp"

namespace jobtrail::node {

std::string_view phase_name(Phase p) {
    return p == Phase::kProlog ? "prolog" : "epilog";
}

bool parse_phase(std::string_view s, Phase& out) {
    if (s == "prolog")
        out = Phase::kProlog;
    else if (s == "epilog")
        out = Phase::kEpilog;
    else
        return false;
    return true;
}

bool valid_job_id(std::string_view id) {
    if (id.empty() || id.size() > 20) return false;
    for (const char c : id)
        if (c < '0' || c > '9') return false;
    return true;
}

std::optional<JobLogName> parse_job_log(std::string_view path) {
    constexpr std::string_view kSuffix = ".log";
    const size_t slash = path.rfind('/');
    if (slash == std::string_view::npos || path.size() < kSuffix.size() ||
        path.substr(path.size() - kSuffix.size()) != kSuffix)
        return std::nullopt;
    const std::string_view job = path.substr(slash + 1, path.size() - slash - 1 - kSuffix.size());
    const std::string_view dir = path.substr(0, slash);
    JobLogName n{Phase::kProlog, std::string(job)};
    if (!valid_job_id(job) || !parse_phase(dir.substr(dir.rfind('/') + 1), n.phase)) return std::nullopt;
    return n;
}

std::string Layout::job_log_dir(Phase p) const {
    return log_dir + "/" + std::string(phase_name(p));
}

std::string Layout::job_log(Phase p, const std::string& job_id) const {
    return job_log_dir(p) + "/" + job_id + ".log";
}

std::string Layout::job_logs_glob() const {
    return log_dir + "/{prolog,epilog}/*.log";
}

std::string Layout::nccl_job_dir(const std::string& job_id) const {
    return nccl_dir + "/" + job_id;
}

std::string Layout::nccl_files_glob() const {
    return nccl_dir + "/*/*.log";
}

std::string Layout::jobs_dir() const {
    return run_dir + "/jobs";
}

std::string Layout::job_marker(const std::string& job_id) const {
    return jobs_dir() + "/" + job_id;
}

std::string Layout::ended_dir() const {
    return run_dir + "/ended";
}

std::string Layout::ended_marker(const std::string& job_id) const {
    return ended_dir() + "/" + job_id;
}

std::string Layout::steps_dir() const {
    return run_dir + "/steps";
}

std::string Layout::step_record(const std::string& job_id, const std::string& step) const {
    return steps_dir() + "/" + job_id + "." + step;
}

std::string Layout::kmsg_marks_dir() const {
    return state_dir + "/kmsg-marks";
}

std::string Layout::kmsg_mark(const std::string& job_id) const {
    return kmsg_marks_dir() + "/" + job_id;
}

}  // namespace jobtrail::node
