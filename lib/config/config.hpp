#pragma once

#include <string>
#include <vector>

#include "config/collector_config.hpp"
#include "config/shipper_config.hpp"

namespace jobtrail::config {

// The admin CLI's site defaults (its flags override them). Loki comes from shipper.loki.
struct CliConfig {
    std::string output_dir = ".";
    int64_t margin_ms = 600'000;             // kernel context before and after a job
    int64_t lookback_ms = 7LL * 86'400'000;  // how far back `bundle` looks for a job
    int parallel = 4;                        // queries in flight
};

// /etc/jobtrail/jobtrail.yaml: one file, one section per part.
struct Config {
    std::string cluster;  // empty: SLURM_CLUSTER_NAME
    std::string node;     // empty: SLURMD_NODENAME, then the host name
    CollectorConfig collector = default_collector_config();
    ShipperConfig shipper = default_shipper_config();
    CliConfig cli;
};

// "file:line:col: key 'collector.prolog.script_timeout': expected a duration such as 30s"
struct ConfigError {
    std::string file;
    int line = 0;
    int column = 0;
    std::string key;
    std::string message;
    std::string text() const;
};

struct LoadResult {
    Config config;
    std::vector<ConfigError> errors;  // every problem found; the config keeps defaults there
    bool file_missing = false;
};

inline constexpr const char* kDefaultConfigPath = "/etc/jobtrail/jobtrail.yaml";

// Parses the file strictly (unknown keys are errors) but tolerantly: a bad key is reported and
// keeps its default, so a typo cannot stop collectors from running the site's scripts.
// `sources`: the sections allowed under shipper.sources, each parsed by its kind of source
// (shipper::source_sections() has them all); without them shipper.sources must be absent.
LoadResult load_config(const std::string& path, SourceSections sources = {});
LoadResult parse_config(const std::string& yaml_text, const std::string& file_name, SourceSections sources = {});

// --config, then $JOBTRAIL_CONFIG, then the default path.
std::string resolve_config_path(const std::string& flag_value);

}  // namespace jobtrail::config
