#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "collector/job_facts.hpp"
#include "config/config.hpp"
#include "joblog/writer.hpp"
#include "kmsg/boot_clock.hpp"

namespace jobtrail::collector {

enum class Phase { kProlog, kEpilog };
std::string_view phase_name(Phase p);

// Shared by jobtrail-prolog and jobtrail-epilog: configuration, job facts, the job log and the
// collector's own error reporting. Nothing here may change the collector's exit status: every
// failure becomes a notice on stderr (slurmd keeps it in its log) and, when possible, a
// `jobtrail` line in the job log.
class Session {
public:
    Session(Phase phase, std::string config_path);

    Phase phase() const { return phase_; }
    const config::Config& config() const { return cfg_; }
    const config::PhaseConfig& phase_config() const;
    const JobFacts& facts() const { return facts_; }
    joblog::Writer& log() { return *log_; }
    const kmsg::BootClock& clock() const { return clock_; }
    int64_t start_ns() const { return start_ns_; }

    void notice(std::string_view severity, std::string_view msg);
    void header();
    void footer(int status, std::string_view summary);

    // The environment for site scripts and probes (Slurm's, plus PATH when slurmd gave none).
    const std::vector<std::string>& child_env() const { return child_env_; }

private:
    Phase phase_;
    std::string config_path_;
    config::Config cfg_;
    JobFacts facts_;
    std::unique_ptr<joblog::Writer> log_;
    kmsg::BootClock clock_;
    int64_t start_ns_;
    int64_t start_mono_;
    std::vector<std::string> child_env_;
    int config_errors_ = 0;
};

}  // namespace jobtrail::collector
