#include "forensics/xid_table.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

#include "common/text.hpp"
#include "common/time.hpp"
#include "devices/gpus.hpp"
#include "events/xid_catalogue.hpp"
#include "forensics/dcgm_lines.hpp"

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

void XidTable::Row::add(int64_t ts, const std::string& key, const events::Event& ev) {
    first = count ? std::min(first, ts) : ts;
    last = count ? std::max(last, ts) : ts;
    ++count;
    if (seen.size() < kMaxSightings) seen.emplace_back(ts, key);
    meaning = ev.meaning;
    action = ev.action;
    severity = std::string(events::severity_name(ev.severity));
}

void XidTable::add(const std::string& node, int64_t ts, std::string_view line) {
    const auto ev = extractor_.extract(line);
    if (!ev || !ev->xid) return;
    rows_[{node, ev->xid}].add(ts, ev->kind == "xid" ? devices::bdf_key(ev->pci_bdf) : "", *ev);
}

void XidTable::add_dcgm(const std::string& node, int64_t ts, std::string_view line, const loki::LabelSet* labels) {
    const auto r = read_dcgm(line, labels);
    if (!r || r->event.kind != dcgm::Kind::kXid) return;
    const int xid = static_cast<int>(r->event.value);
    dcgm_[{node, xid}].add(ts, r->bdf_key, events::xid_event(xid, r->bdf_key, "dcgm-xid"));
}

std::vector<std::pair<std::pair<std::string, int>, XidTable::Row>> XidTable::rows() const {
    std::vector<std::pair<std::pair<std::string, int>, Row>> out;
    std::map<std::pair<std::string, int>, size_t> at;
    for (const auto& [k, row] : rows_) {
        at[k] = out.size();
        out.emplace_back(k, row);
        out.back().second.source = "kernel";
        auto& seen = out.back().second.seen;
        std::sort(seen.begin(), seen.end());
    }
    for (const auto& [k, d] : dcgm_) {
        const auto kernel = at.find(k);
        Row left = d;  // the DCGM sightings no kernel line corroborates
        left.count = 0;
        left.first = left.last = 0;
        for (const auto& [ts, key] : d.seen) {
            if (kernel != at.end()) {
                Row& kr = out[kernel->second].second;
                if (corroborating(kr.seen.begin(), kr.seen.end(), ts, key, k.second) != kr.seen.end()) {
                    kr.source = "kernel+dcgm";
                    continue;
                }
            }
            left.first = left.count ? std::min(left.first, ts) : ts;
            left.last = left.count ? std::max(left.last, ts) : ts;
            ++left.count;
        }
        if (d.count > d.seen.size()) {  // past the sightings kept: not corroborated
            if (!left.count) left.first = d.first;
            left.count += d.count - d.seen.size();
            left.last = d.last;
        }
        if (!left.count) continue;
        left.source = "dcgm";
        out.emplace_back(k, std::move(left));
    }
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    return out;
}

nlohmann::json XidTable::json() const {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [k, row] : rows())
        out.push_back({{"node", k.first},
                       {"xid", k.second},
                       {"source", row.source},
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
    appendf(s, "%-16s %5s %6s  %-8s %-11s %-31s %s\n", "NODE", "XID", "COUNT", "SEVERITY", "SOURCE", "LAST (UTC)",
            "MEANING / ACTION");
    // Node names are labels from Loki's answer: data, never control sequences for the terminal.
    for (const auto& [k, row] : rows())
        appendf(s, "%-16s %5d %6llu  %-8s %-11s %-31s %s\n%74s-> %s\n", escape_line(k.first).c_str(), k.second,
                static_cast<unsigned long long>(row.count), row.severity.c_str(), row.source.c_str(),
                format_rfc3339_ns(row.last).c_str(), row.meaning.c_str(), "", row.action.c_str());
    if (empty()) appendf(s, "no Xid in the last %s\n", since.c_str());
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
