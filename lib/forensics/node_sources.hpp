#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "forensics/logql.hpp"
#include "forensics/node_view.hpp"
#include "loki/client.hpp"
#include "loki/query.hpp"
#include "node/layout.hpp"
#include "node/schema.hpp"

// Where `jobtrail node` reads a node's story from: this node's job logs, or Loki.
namespace jobtrail::forensics {

// This node's prolog and epilog logs: the jobs from their headers, the kernel records the
// collectors kept in them (a record once, however many logs hold it). Returns the files read.
int node_from_local(const node::Layout& layout, NodeView& v, int64_t from_ns, int64_t to_ns);

// The node's job log lines, kernel records and DCGM events in Loki, of the scope's cluster (a node name is
// one cluster's; without a cluster, records of several clusters are an error that names them).
// Returns each failed query's error.
std::vector<std::string> node_from_loki(loki::Client& client, const Scope& scope, const std::string& node,
                                        int64_t from_ns, int64_t to_ns, const loki::QueryOptions& query, NodeView& v);

}  // namespace jobtrail::forensics
