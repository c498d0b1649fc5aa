#include "forensics/xid_search.hpp"

#include "loki/query_back.hpp"
#include "node/schema.hpp"

namespace jobtrail::forensics {

XidSearch find_xids(loki::Client& client, const Scope& scope, const std::vector<std::string>& nodes, int64_t start_ns,
                    int64_t end_ns, const loki::QueryOptions& options, bool cluster_in_node, XidTable& table) {
    XidSearch s;
    // The kernel's Xid lines, then DCGM's: each line's cluster checked, each into the table.
    auto sink = [&](bool dcgm) {
        return [&, dcgm](const loki::QueryEntry& e) {
            auto it = e.labels->find(node::label::kNode);
            auto cl = e.labels->find(node::label::kCluster);
            const std::string cluster = cl == e.labels->end() ? std::string() : cl->second;
            if (!scope.cluster.empty() && cluster != scope.cluster) {
                ++s.foreign;
                return;
            }
            if (s.clusters.size() < 64) s.clusters.insert(cluster);
            const std::string node = it == e.labels->end() ? "?" : it->second;
            const std::string name = cluster_in_node ? cluster + "/" + node : node;
            if (dcgm)
                table.add_dcgm(name, e.ts_ns, e.line, e.labels);
            else
                table.add(name, e.ts_ns, e.line);
        };
    };
    const auto r = loki::query_back(
        client, xid_query(scope, nodes), start_ns, end_ns, options, sink(false), [](int64_t, int64_t) { return true; },
        {stream_selector(scope, node::StreamKind::kKernel, nodes)}, loki::kQueryBackMaxPieceNs);
    const auto d = loki::query_back(
        client, dcgm_xid_query(scope, nodes), start_ns, end_ns, options, sink(true),
        [](int64_t, int64_t) { return true; }, {stream_selector(scope, node::StreamKind::kDcgm, nodes)},
        loki::kQueryBackMaxPieceNs);
    if (d.failed && !r.failed) {
        s.failed = true;
        s.error = d.error;
        return s;
    }
    s.failed = r.failed;
    s.error = r.error;
    return s;
}

}  // namespace jobtrail::forensics
