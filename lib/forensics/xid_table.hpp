#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "events/extractor.hpp"

// `jobtrail xid`: the fleet's Xid events, one row per node and Xid, with what NVIDIA says they
// mean and what to do; and the catalogue those come from.
namespace jobtrail::forensics {

class XidTable {
public:
    // A kernel line from `node`; anything but an Xid is ignored. In any order.
    void add(const std::string& node, int64_t ts_ns, std::string_view line);
    bool empty() const { return rows_.empty(); }
    nlohmann::json json() const;
    // `since` as the operator gave it, for "no Xid in the last 24h".
    std::string text(const std::string& since) const;

private:
    struct Row {
        uint64_t count = 0;
        int64_t first = 0, last = 0;
        std::string meaning, action, severity;
    };
    events::Extractor extractor_;
    std::map<std::pair<std::string, int>, Row> rows_;  // by node, Xid
};

// NVIDIA's Xid catalogue as jobtrail knows it: what the alert rules and the summaries use.
nlohmann::json xid_catalogue_json();
std::string xid_catalogue_text();

}  // namespace jobtrail::forensics
