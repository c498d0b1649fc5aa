#pragma once

#include <map>
#include <string>
#include <vector>

#include "collector/session.hpp"

namespace jobtrail::collector {

// Expands the configured paths/globs the way slurmd expands a globbed Prolog=: each pattern's
// matches in reverse alphabetical order.
std::vector<std::string> expand_scripts(const std::vector<std::string>& patterns, std::vector<std::string>& errors);

struct ScriptsOutcome {
    int status = 0;  // what slurmd would have seen from the site scripts: 0 or the first failure
    int ran = 0;
    std::string failed;  // the script that failed, if any
};

// Runs the site scripts in order, stopping at the first failure (as slurmd does), each under
// min(script_timeout, what is left of total_timeout), capturing their output into the job log.
ScriptsOutcome run_site_scripts(Session& s);

// Runs the phase's probes (nvidia-smi, dcgmi, ...), recording output and outcome. A missing
// program is recorded as skipped. Probes never affect the exit status. Returns each probe's
// first standard output lines (at most 256 of 1 KiB), by probe name, for the prolog's devices.
std::map<std::string, std::vector<std::string>> run_probes(Session& s);

}  // namespace jobtrail::collector
