#include "forensics/xid_table.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

#include "common/text.hpp"
#include "common/time.hpp"
#include "events/xid_catalogue.hpp"

namespace jobtrail::forensics {
namespace {

// printf's columns, into a string.
__attribute__((format(printf, 2, 3))) void appendf(std::string& out, const char* fmt, ...) {
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    const int n = std::vsnprintf(nullptr, 0, fmt, ap);
    va_end(ap);
    if (n > 0) {
        const size_t at = out.size();
        out.resize(at + static_cast<size_t>(n) + 1);
        std::vsnprintf(out.data() + at, static_cast<size_t>(n) + 1, fmt, again);
        out.resize(at + static_cast<size_t>(n));
    }
    va_end(again);
}

}  // namespace

void XidTable::add(const std::string& node, int64_t ts, std::string_view line) {
    const auto ev = extractor_.extract(line);
    if (!ev || !ev->xid) return;
    Row& row = rows_[{node, ev->xid}];
    row.first = row.count ? std::min(row.first, ts) : ts;
    row.last = row.count ? std::max(row.last, ts) : ts;
    ++row.count;
    row.meaning = ev->meaning;
    row.action = ev->action;
    row.severity = std::string(events::severity_name(ev->severity));
}

nlohmann::json XidTable::json() const {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [k, row] : rows_)
        out.push_back({{"node", k.first},
                       {"xid", k.second},
                       {"count", row.count},
                       {"first", format_rfc3339_ns(row.first)},
                       {"last", format_rfc3339_ns(row.last)},
                       {"severity", row.severity},
                       {"meaning", row.meaning},
                       {"action", row.action}});
    return out;
}

std::string XidTable::text(const std::string& since) const {
    std::string s;
    appendf(s, "%-16s %5s %6s  %-8s %-31s %s\n", "NODE", "XID", "COUNT", "SEVERITY", "LAST (UTC)", "MEANING / ACTION");
    // Node names are labels from Loki's answer: data, never control sequences for the terminal.
    for (const auto& [k, row] : rows_)
        appendf(s, "%-16s %5d %6llu  %-8s %-31s %s\n%62s-> %s\n", escape_line(k.first).c_str(), k.second,
                static_cast<unsigned long long>(row.count), row.severity.c_str(), format_rfc3339_ns(row.last).c_str(),
                row.meaning.c_str(), "", row.action.c_str());
    if (rows_.empty()) appendf(s, "no Xid in the last %s\n", since.c_str());
    return s;
}

nlohmann::json xid_catalogue_json() {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& x : events::xid_catalogue())
        out.push_back({{"xid", x.code},
                       {"mnemonic", x.mnemonic},
                       {"meaning", x.meaning},
                       {"severity", events::severity_name(x.severity)},
                       {"nvidia_action", x.immediate},
                       {"action", x.action}});
    return out;
}

std::string xid_catalogue_text() {
    std::string s;
    appendf(s, "%5s  %-8s %-18s %s\n", "XID", "SEVERITY", "NVIDIA ACTION", "MEANING -> ACTION");
    for (const auto& x : events::xid_catalogue())
        appendf(s, "%5d  %-8s %-18s %s\n%35s-> %s\n", x.code, std::string(events::severity_name(x.severity)).c_str(),
                std::string(x.immediate).c_str(), std::string(x.meaning).c_str(), "", std::string(x.action).c_str());
    return s;
}

}  // namespace jobtrail::forensics
