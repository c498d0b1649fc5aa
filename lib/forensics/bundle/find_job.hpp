#pragma once

#include <optional>
#include <set>
#include <string>

#include "forensics/bundle.hpp"
#include "forensics/bundle/collection.hpp"

namespace jobtrail::forensics::bundle {

struct FoundJob {
    Window window;                             // what to fetch, without the margin; end_ns 0 when not known
    int64_t job_start_ns = 0, job_end_ns = 0;  // the job's own, from its records; 0 when not known
    std::string cluster;                       // the cluster every query is for ("" : not known)
    std::set<std::string> missing_nodes;       // in the job's nodelist, without a prolog/epilog record
    std::string nodelist_notes;                // what the summary should say about finding it
    std::optional<QueryRecord> query;          // the query that looked for the job
    int exit_code = kExitOk;                   // kExitNotFound, kExitUsage (which cluster?), or kExitPartial
    std::string error;
};

// Where and when the job ran: the collectors' prolog/epilog records in Loki (their nodes, and
// those the job's nodelist names), else Slurm's accounting; the options' nodes and window bound
// it. Looked for from the newest records back, a day, then two, four..., and only as far as its
// latest run: a long window costs what the job's own records cost, and an earlier job that had
// the same id (a reset Slurm, another cluster) is not merged in. Without a cluster name, Loki's
// index says which clusters hold the job id: one is taken, several are an error that names them.
FoundJob find_job(const BundleOptions& o);

// The job's window from Slurm's accounting (`sacct`), its nodes expanded by `scontrol show
// hostnames` (what scontrol says on stderr is no node); false when sacct does not know the job.
bool window_from_slurm(const BundleOptions& o, Window& w);

}  // namespace jobtrail::forensics::bundle
