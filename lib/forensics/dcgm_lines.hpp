#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dcgm/event.hpp"
#include "loki/query_response.hpp"

// DCGM's lines as the CLI reads them back from Loki (bundle, node, xid): the line parsed by its
// owner (dcgm::parse_line), its device from the structured metadata, and the one rule that says
// when a DCGM Xid and a kernel Xid line are the same event. Everything Loki returns is data
// anyone who can push could have written: the text decides what the event is (never the
// `event`/`xid`/`severity` metadata), and a device address is believed only when the metadata's
// `gpu` agrees with the line's GPU.
namespace jobtrail::forensics {

// DCGM's XID callback and the kernel's NVRM line come from the same driver error through two
// paths (NVML's event set polled by the host engine, the kernel's printk): they land within about
// a second of each other; 10 s leaves room for a loaded host engine and the two clocks (DCGM's
// time, the kernel record's boot-offset time) without joining two separate errors of a GPU that
// keeps failing (those come tens of seconds apart as the job's retries hit it).
inline constexpr int64_t kCorroborationWindowNs = 10'000'000'000;

struct DcgmRecord {
    dcgm::Event event;    // as the line says; pci_bdf: the metadata's, cut (escaped, 64 bytes)
    std::string bdf_key;  // devices::bdf_key of the metadata's pci_bdf; empty when not believed
    events::Severity severity = events::Severity::kInfo;  // dcgm::severity of the line's event
};

// nullopt when the line is not one of DCGM's (it is still archived, but is no event).
// `labels`: the entry's labels and structured metadata (nullptr: none).
std::optional<DcgmRecord> read_dcgm(std::string_view line, const loki::LabelSet* labels);

// "Xid 79 on GPU 3 (0000:3b:00)" / "DCGM_FR_... on GPU 3": what the event is, for titles.
std::string dcgm_title(const DcgmRecord& r);

// The same GPU (bdf keys equal, neither empty), the same Xid, at most kCorroborationWindowNs
// apart.
bool corroborates(int64_t dcgm_ts_ns, const std::string& dcgm_bdf_key, int dcgm_xid, int64_t kernel_ts_ns,
                  const std::string& kernel_bdf_key, int kernel_xid);

// Of kernel sightings (time, bdf key) of one Xid, sorted by time: the first that corroborates a
// DCGM sighting of that Xid, or end. Only those within the window are looked at (a binary search):
// a flood of lines costs its logarithm per sighting, not their product.
template <class It>
It corroborating(It first, It last, int64_t dcgm_ts_ns, const std::string& dcgm_bdf_key, int xid) {
    auto it = std::lower_bound(first, last, dcgm_ts_ns - kCorroborationWindowNs,
                               [](const auto& s, int64_t t) { return s.first < t; });
    for (; it != last && it->first <= dcgm_ts_ns + kCorroborationWindowNs; ++it)
        if (corroborates(dcgm_ts_ns, dcgm_bdf_key, xid, it->first, it->second, xid)) return it;
    return last;
}

}  // namespace jobtrail::forensics
