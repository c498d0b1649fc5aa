#include "forensics/dcgm_lines.hpp"

#include <re2/re2.h>

#include "common/text.hpp"
#include "devices/gpus.hpp"
#include "events/extractor.hpp"
#include "node/schema.hpp"

namespace jobtrail::forensics {
namespace {

// The highest Xid NVIDIA's catalogue reaches is in the hundreds: a larger one is no driver's.
constexpr int64_t kMaxXid = 65'535;

std::string_view label(const loki::LabelSet* labels, const char* k) {
    if (!labels) return {};
    const auto it = labels->find(k);
    return it == labels->end() ? std::string_view() : std::string_view(it->second);
}

}  // namespace

std::optional<DcgmRecord> read_dcgm(std::string_view line, const loki::LabelSet* labels) {
    auto e = dcgm::parse_line(line);
    if (!e) return std::nullopt;
    if (e->kind == dcgm::Kind::kHealth && e->code == "DCGM_FR_XID_ERROR") {
        // DCGM's health watch files an Xid it saw (48, 74, 79, 119, ...) as this incident beside
        // the XID violation: "Detected XID %u for GPU %u" (dcgm_errors.h). The same sighting, so
        // an Xid; its clearing is no event, and a message naming another GPU is no Xid.
        if (e->cleared) return std::nullopt;
        static const RE2 re(R"(Detected XID (\d+) for GPU (\d+)\b.*)");
        int64_t xid = 0;
        unsigned gpu = 0;
        if (RE2::FullMatch(e->message, re, &xid, &gpu) && gpu == e->gpu) {
            e->kind = dcgm::Kind::kXid;
            e->value = xid;
        }
    }
    if (e->kind == dcgm::Kind::kXid && (e->value <= 0 || e->value > kMaxXid)) return std::nullopt;
    DcgmRecord r;
    r.event = std::move(*e);
    const std::string_view bdf = label(labels, node::metadata::kPciBdf);
    r.event.pci_bdf = escape_line(utf8_prefix(bdf, 64));
    // The device is the metadata's; believed only when the metadata's GPU is the line's, so a
    // line cannot name GPU 3 in its text and another GPU's address beside it.
    if (label(labels, node::metadata::kGpu) == std::to_string(r.event.gpu)) r.bdf_key = devices::bdf_key(bdf);
    r.severity = dcgm::severity(r.event);
    return r;
}

std::string dcgm_title(const DcgmRecord& r) {
    const std::string where = r.bdf_key.empty() ? "" : " (" + r.bdf_key + ")";
    if (r.event.kind != dcgm::Kind::kXid) {
        std::string t = dcgm::format_line(r.event);
        const std::string gpu = "on GPU " + std::to_string(r.event.gpu);
        if (const size_t at = t.find(gpu); at != std::string::npos) t.insert(at + gpu.size(), where);
        return t;
    }
    const auto ev = events::xid_event(static_cast<int>(r.event.value), r.bdf_key, "dcgm-xid");
    return "Xid " + std::to_string(r.event.value) + " on GPU " + std::to_string(r.event.gpu) + where +
           (ev.meaning.empty() ? "" : ": " + ev.meaning);
}

bool corroborates(int64_t dcgm_ts, const std::string& dcgm_key, int dcgm_xid, int64_t kernel_ts,
                  const std::string& kernel_key, int kernel_xid) {
    const int64_t apart = dcgm_ts > kernel_ts ? dcgm_ts - kernel_ts : kernel_ts - dcgm_ts;
    return !dcgm_key.empty() && dcgm_key == kernel_key && dcgm_xid == kernel_xid && apart <= kCorroborationWindowNs;
}

}  // namespace jobtrail::forensics
