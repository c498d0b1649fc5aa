#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shipper/sources/kind.hpp"

namespace jobtrail::shipper {

// shipper.sources.journald: the systemd journal (slurmd, fabric manager, ...), one stream per
// unit and priority.
struct JournaldConfig {
    bool enabled = true;                  // ignored, with a warning, by a build without libsystemd
    std::vector<std::string> units;       // _SYSTEMD_UNIT values; empty: every unit (the config refuses [])
    std::string directory;                // journal files from here instead of the system journal
    int64_t since_ms = 12LL * 3'600'000;  // first start, no cursor yet: how far back to begin
};

struct JournaldKind {
    static constexpr const char* kName = "journald";
    using Config = JournaldConfig;
    static Config defaults();
    static void parse(config::Parser& p, const YAML::Node& sources, const std::string& where, Config& out);
    static void schema(const Config&, node::Schema&) {}  // {job="systemd-journal"}: not configurable
    static void build(const SourceContext& ctx, const Config& c, Sources& out);
};

}  // namespace jobtrail::shipper
