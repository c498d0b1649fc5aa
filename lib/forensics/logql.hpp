#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "node/schema.hpp"

// The LogQL a job's forensics needs, written for the labels the shipper produces (design.md):
// one place, so the bundle, `jobtrail logql` and the tests agree.
namespace jobtrail::forensics {

// A LogQL double-quoted string literal: \ and " escaped, newlines as \n.
std::string logql_string(std::string_view v);
// node="a" for one node, node=~"a|b" (regex-quoted) for several.
std::string node_matcher(const std::vector<std::string>& nodes);

// Whose streams a query asks for: the site's `job` values (config::stream_schema) and one
// cluster (the `cluster` label; empty: every cluster, for `xid --all-clusters` and for finding
// which clusters hold a job id).
struct Scope {
    node::Schema schema;
    std::string cluster;
};

struct NamedQuery {
    std::string name;  // what it is for: "prolog/epilog", "kernel gpu01", ...
    std::string logql;
};

// Each takes the scope: the `job` values are the site's (config), not spelled here, and the
// cluster, when one is given, is matched by every query.
// The job's prolog/epilog lines (of `nodes` only, when given).
std::string prolog_epilog_query(const Scope& s, const std::string& job_id, const std::vector<std::string>& nodes = {});
std::string nccl_query(const Scope& s, const std::string& job_id, const std::string& node = "");
// Only the NCCL lines that say their process's step (each file's first line, then every ten
// minutes): which step each host:pid was.
std::string nccl_step_query(const Scope& s, const std::string& job_id, const std::string& node);
std::string kernel_query(const Scope& s, const std::string& node);
// The lines of a node's prolog/epilog logs that say which jobs ran there and on which devices.
std::string node_jobs_query(const Scope& s, const std::string& node);
std::string slurmd_query(const Scope& s, const std::string& node, const std::string& job_id);
std::string fabric_manager_query(const Scope& s, const std::string& node);
// A node's DCGM events (the shipper's dcgm source: violations and health incidents).
std::string dcgm_query(const Scope& s, const std::string& node);
// Fleet-wide DCGM Xid lines (jobtrail xid), by their text (dcgm/event.hpp's "XID 79 on GPU 3").
std::string dcgm_xid_query(const Scope& s, const std::vector<std::string>& nodes);
// The streams of one kind (of `nodes` only, when given), without a line filter: what Loki's
// index (series) is asked about.
std::string stream_selector(const Scope& s, node::StreamKind kind, const std::vector<std::string>& nodes = {});
// Fleet-wide Xid lines (jobtrail xid).
std::string xid_query(const Scope& s, const std::vector<std::string>& nodes);

// Everything worth pasting into Grafana for one job, node filters included.
std::vector<NamedQuery> job_queries(const Scope& s, const std::string& job_id, const std::vector<std::string>& nodes,
                                    bool structured_metadata);

}  // namespace jobtrail::forensics
