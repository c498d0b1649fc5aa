#include "forensics/bundle/notes.hpp"

#include "common/text.hpp"
#include "common/time.hpp"

namespace jobtrail::forensics::bundle {
namespace {

std::string node_list(const Gathered& g) {
    std::string list;
    for (const auto& n : g.missing_nodes) list += (list.empty() ? "" : ", ") + escape_line(n);
    return list;
}

}  // namespace

std::string summary_notes(const BundleOptions& o, const Gathered& g) {
    std::string s;
    const Window& w = g.window;
    if (!o.local) {
        constexpr int64_t kHour = 3'600'000'000'000;
        const int64_t now = realtime_ns();
        // Loki asks its ingesters only for the last query_ingesters_within (3h): lines stamped
        // earlier that arrived late (a shipper backlog) stay invisible until a chunk flush
        // (max_chunk_age 2h) writes them to storage.
        if (w.end_ns > now - 5 * kHour)
            s += "\nNOTE\n----\nthe window is recent: lines stamped more than 3 h ago that reached Loki late (a "
                 "shipper backlog) are invisible to queries until Loki flushes them (query_ingesters_within 3h, "
                 "max_chunk_age 2h); if something seems missing, run the bundle again in a few hours\n";
        if (o.query.max_query_lookback_ns && w.start_ns < now - o.query.max_query_lookback_ns)
            s += "\nNOTE\n----\nthe window starts before Loki's max_query_lookback (" +
                 std::to_string(o.query.max_query_lookback_ns / kHour) + " h): records older than " +
                 format_rfc3339_ns(now - o.query.max_query_lookback_ns) + " cannot be queried and are missing\n";
    }
    if (!g.missing_nodes.empty())
        s += "\nMISSING NODES\n-------------\n" + node_list(g) +
             ": in the job's nodelist but without any prolog/epilog record in Loki (the node's "
             "shipper down or behind?); this bundle lacks their story: run it again once they ship\n";
    if (!g.nodelist_notes.empty()) s += "\nNOTE\n----\n" + g.nodelist_notes;
    return s;
}

std::string partial_reason(const Gathered& g) {
    std::string why = node_list(g);
    if (!why.empty()) why = "no records from node(s) " + why;
    if (g.any_failed()) why += std::string(why.empty() ? "" : " and ") + "some queries failed";
    return why + "; the bundle is partial (see manifest.json)";
}

}  // namespace jobtrail::forensics::bundle
