#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "events/extractor.hpp"
#include "loki/query_response.hpp"

// `jobtrail xid`: the fleet's Xid events, one row per node, Xid and source, with what NVIDIA says
// they mean and what to do; and the catalogue those come from. The source: `kernel` (NVRM lines),
// `kernel+dcgm` (DCGM reported one of them too: dcgm_lines.hpp's corroboration), `dcgm` (Xids
// DCGM reported that no kernel line of the node corroborates).
namespace jobtrail::forensics {

class XidTable {
public:
    // A kernel line from `node`; anything but an Xid is ignored. In any order.
    void add(const std::string& node, int64_t ts_ns, std::string_view line);
    // A line of a DCGM stream with its entry's labels and metadata; anything but an Xid is ignored.
    void add_dcgm(const std::string& node, int64_t ts_ns, std::string_view line, const loki::LabelSet* labels);
    // Sightings kept per node and Xid for the corroboration (the counts go on past it); a DCGM Xid
    // past it counts as not seen by the kernel.
    static constexpr size_t kMaxSightings = 4096;
    bool empty() const { return rows_.empty() && dcgm_.empty(); }
    nlohmann::json json() const;
    // `since` as the operator gave it, for "no Xid in the last 24h".
    std::string text(const std::string& since) const;

private:
    struct Row {
        uint64_t count = 0;
        int64_t first = 0, last = 0;
        std::string meaning, action, severity, source;
        std::vector<std::pair<int64_t, std::string>> seen;  // time, bdf key (at most kMaxSightings)
        void add(int64_t ts, const std::string& key, const events::Event& ev);
    };
    // The rows as printed: by node, Xid, then kernel before dcgm.
    std::vector<std::pair<std::pair<std::string, int>, Row>> rows() const;
    events::Extractor extractor_;
    std::map<std::pair<std::string, int>, Row> rows_, dcgm_;  // by node, Xid
};

// NVIDIA's Xid catalogue as jobtrail knows it: what the alert rules and the summaries use.
nlohmann::json xid_catalogue_json();
std::string xid_catalogue_text();

}  // namespace jobtrail::forensics
