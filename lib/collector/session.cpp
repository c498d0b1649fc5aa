#include "collector/session.hpp"

#include <cstdio>
#include <cstdlib>

#include "common/time.hpp"
#include "joblog/format.hpp"
#include "jobtrail/version.hpp"
#include "process/runner.hpp"
#include "shipper/sources/registry.hpp"

namespace jobtrail::collector {

std::string_view phase_name(Phase p) {
    return p == Phase::kProlog ? "prolog" : "epilog";
}

Session::Session(Phase phase, std::string config_path)
    : phase_(phase), config_path_(std::move(config_path)), start_ns_(realtime_ns()), start_mono_(monotonic_ns()) {
    auto loaded = config::load_config(config_path_, shipper::source_sections());
    cfg_ = std::move(loaded.config);
    facts_ = job_facts_from_env(cfg_.cluster, cfg_.node);
    log_ = std::make_unique<joblog::Writer>(cfg_.collector.max_log_bytes, cfg_.collector.max_line_bytes);

    if (facts_.valid_job_id()) {
        const std::string dir = cfg_.collector.log_dir + "/" + std::string(phase_name(phase_));
        if (auto st = log_->open(dir, facts_.job_id + ".log"); !st.ok)
            notice("error", "cannot write job log: " + st.error);
    } else {
        notice("error", "SLURM_JOB_ID is missing or not a number ('" + facts_.job_id +
                            "'); not run by slurmd? No job log is written");
    }
    if (loaded.file_missing) notice("warning", "config file " + config_path_ + " not found; using defaults");
    for (const auto& e : loaded.errors) {
        ++config_errors_;
        notice("error", "config: " + e.text() + " (default kept)");
    }
    if (auto st = clock_.load(cfg_.collector.state_dir); !st.ok) notice("warning", "boot clock: " + st.error);

    std::vector<std::string> overrides;
    if (!std::getenv("PATH")) overrides.push_back("PATH=" + cfg_.collector.path);
    child_env_ = process::environment_with(overrides);
}

const config::PhaseConfig& Session::phase_config() const {
    return phase_ == Phase::kProlog ? cfg_.collector.prolog : cfg_.collector.epilog;
}

void Session::notice(std::string_view severity, std::string_view msg) {
    std::fprintf(stderr, "jobtrail-%s: %.*s: %.*s\n", std::string(phase_name(phase_)).c_str(),
                 static_cast<int>(severity.size()), severity.data(), static_cast<int>(msg.size()), msg.data());
    if (log_ && log_->is_open())
        log_->line(realtime_ns(), joblog::kJobtrail, "", std::string(severity) + ": " + std::string(msg));
}

void Session::header() {
    if (!log_->is_open()) return;
    auto meta = [&](const std::string& k, const std::string& v) {
        log_->line(start_ns_, joblog::kMeta, "", k + "=" + v);
    };
    meta("phase", std::string(phase_name(phase_)));
    meta("jobtrail_version", kVersion);
    meta("start_time", format_rfc3339_ns(start_ns_));
    for (const auto& [k, v] : header_fields(facts_)) meta(k, v);
    meta("config", config_path_ + (config_errors_ ? " (" + std::to_string(config_errors_) + " errors)" : ""));
    meta("boot_id", clock_.boot_id());
    log_->flush();
}

void Session::footer(int status, std::string_view summary) {
    const int64_t us = (monotonic_ns() - start_mono_) / 1000;
    char dur[32];
    std::snprintf(dur, sizeof dur, "%lld.%03lld", static_cast<long long>(us / 1000), static_cast<long long>(us % 1000));
    std::string text = "status=" + std::to_string(status) + " duration_ms=" + dur;
    if (!summary.empty()) text += " " + std::string(summary);
    if (log_->lines_dropped()) text += " dropped_lines=" + std::to_string(log_->lines_dropped());
    log_->line(realtime_ns(), joblog::kEnd, "", text, /*force=*/true);
    if (!log_->flush() && !log_->write_error().empty())
        std::fprintf(stderr, "jobtrail-%s: error: %s\n", std::string(phase_name(phase_)).c_str(),
                     log_->write_error().c_str());
}

}  // namespace jobtrail::collector
