#include "forensics/xid_search.hpp"

#include "loki/query_back.hpp"
#include "node/schema.hpp"

namespace jobtrail::forensics {

XidSearch find_xids(loki::Client& client, const Scope& scope, const std::vector<std::string>& nodes, int64_t start_ns,
                    int64_t end_ns, const loki::QueryOptions& options, bool cluster_in_node, XidTable& table) {
    XidSearch s;
    const auto r = loki::query_back(
        client, xid_query(scope, nodes), start_ns, end_ns, options,
        [&](const loki::QueryEntry& e) {
            auto it = e.labels->find(node::label::kNode);
            auto cl = e.labels->find(node::label::kCluster);
            const std::string cluster = cl == e.labels->end() ? std::string() : cl->second;
            if (!scope.cluster.empty() && cluster != scope.cluster) {
                ++s.foreign;
                return;
            }
            if (s.clusters.size() < 64) s.clusters.insert(cluster);
            const std::string node = it == e.labels->end() ? "?" : it->second;
            table.add(cluster_in_node ? cluster + "/" + node : node, e.ts_ns, e.line);
        },
        [](int64_t, int64_t) { return true; }, {stream_selector(scope, node::StreamKind::kKernel, nodes)},
        loki::kQueryBackMaxPieceNs);
    s.failed = r.failed;
    s.error = r.error;
    return s;
}

}  // namespace jobtrail::forensics
