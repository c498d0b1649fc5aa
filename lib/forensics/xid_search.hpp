#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "forensics/logql.hpp"
#include "forensics/xid_table.hpp"
#include "loki/query.hpp"

// `jobtrail xid`'s search of Loki: the kernel streams' and the DCGM streams' Xid lines over a
// window, into an XidTable.
namespace jobtrail::forensics {

struct XidSearch {
    std::set<std::string> clusters;  // the clusters the lines came from (at most 64)
    uint64_t foreign = 0;            // lines of another cluster than the scope's, left out
    bool failed = false;
    std::string error;
};

// Xid lines into `table` (an extractor's regexes do not move), from end back to start, a month
// at a time: a month Loki's index holds no kernel stream of is stepped over (a 400-day window on a
// Loki that keeps 30 days). Loki's answer is data: a line of another cluster than the scope's is
// counted in `foreign`, never added. With cluster_in_node, the table names nodes cluster/node
// (node names repeat from one cluster to another).
XidSearch find_xids(loki::Client& client, const Scope& scope, const std::vector<std::string>& nodes, int64_t start_ns,
                    int64_t end_ns, const loki::QueryOptions& options, bool cluster_in_node, XidTable& table);

}  // namespace jobtrail::forensics
