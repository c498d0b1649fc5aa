#pragma once

#include <optional>
#include <set>
#include <string>

#include "forensics/bundle.hpp"
#include "forensics/bundle/collection.hpp"

namespace jobtrail::forensics::bundle {

struct FoundJob {
    Window window;                        // without the margin; end_ns 0 when not known
    bool end_known = false;               // the job's end, not merely its last record
    std::string cluster;                  // the records' `cluster` label
    std::set<std::string> missing_nodes;  // in the job's nodelist, without a prolog/epilog record
    std::string nodelist_notes;
    std::optional<QueryRecord> query;  // the query that looked for the job
    int exit_code = kExitOk;           // kExitNotFound, or kExitPartial when Loki could not say
    std::string error;
};

// Where and when the job ran: what the options say, the rest from the collectors' prolog/epilog
// records in Loki (their nodes, and those the job's nodelist names), else Slurm's accounting.
FoundJob find_job(const BundleOptions& o);

}  // namespace jobtrail::forensics::bundle
