#include "shipper/sources/journald/config.hpp"

#include "config/yaml_parser.hpp"

namespace jobtrail::shipper {

using config::kDay;
using config::kSec;

JournaldConfig JournaldKind::defaults() {
    JournaldConfig c;
    c.enabled = true;
    c.units = {"slurmd.service",
               "slurmctld.service",
               "munge.service",
               "nvidia-fabricmanager.service",
               "nvidia-persistenced.service",
               "nvidia-dcgm.service"};
    return c;
}

void JournaldKind::parse(config::Parser& p, const YAML::Node& sources, const std::string& where, Config& out) {
    const std::string jw = where + "." + kName;
    if (const YAML::Node j = sources[kName]; j && p.check_map(j, jw, {"enabled", "units", "directory", "since"})) {
        p.boolean(j, jw, "enabled", out.enabled);
        // Absent: the default units. An empty list would match every unit, each session
        // scope a stream of its own (unbounded), so it is refused rather than read that way.
        if (const YAML::Node u = j["units"]; u && u.IsSequence() && u.size() == 0)
            p.error(u, jw + ".units",
                    "empty: that would ship every unit, one stream per session scope; list the units, or remove "
                    "the key for the defaults");
        else if (u)
            p.string_list(u, jw + ".units", out.units);
        p.path(j, jw, "directory", out.directory);
        p.duration(j, jw, "since", out.since_ms, kSec, 365 * kDay);
    }
}

}  // namespace jobtrail::shipper
