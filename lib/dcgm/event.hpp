#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "events/xid_catalogue.hpp"

// What NVIDIA's DCGM reports about a GPU, as one log line: a policy violation (one callback of
// dcgmPolicyRegister) or a health incident (dcgmHealthCheck) appearing or clearing. This file owns
// the line's text and the structured metadata that goes with it: the shipper's dcgm source makes
// them, the CLI (bundle, node, xid) parses lines read back from Loki with parse_line.
namespace jobtrail::dcgm {

enum class Kind {
    kXid,           // DCGM_POLICY_COND_XID: value = the Xid
    kDbe,           // DCGM_POLICY_COND_DBE: value = errors, detail = location (l1, l2, device, register, texture)
    kPcie,          // DCGM_POLICY_COND_PCI: value = replay counter
    kRetiredPages,  // DCGM_POLICY_COND_MAX_PAGES_RETIRED: value = single-bit pages, value2 = double-bit pages
    kThermal,       // DCGM_POLICY_COND_THERMAL: value = temperature (C)
    kPower,         // DCGM_POLICY_COND_POWER: value = power (W)
    kNvlink,        // DCGM_POLICY_COND_NVLINK: value = counter, value2 = DCGM field id
    kHealth,        // a health incident: code, system, health, message; cleared when it went away
};
inline constexpr size_t kKinds = 8;

// The `event` metadata value of each kind: xid, ecc_dbe, pcie_replay, retired_pages, thermal,
// power, nvlink, health.
std::string_view kind_name(Kind k);

struct Event {
    Kind kind = Kind::kXid;
    int64_t ts_us = 0;    // DCGM's own time (µs since the epoch); a health check's: when it ran
    unsigned gpu = 0;     // DCGM's GPU id
    std::string pci_bdf;  // DCGM's device attributes' PCI bus id ("00000000:3B:00.0"); empty if unknown
    int64_t value = 0, value2 = 0;
    std::string detail;  // kDbe: the location
    // kHealth: the DCGM_FR_* name (or "DCGM_FR_<number>" for a code this build does not know),
    // the watched system (pcie, nvlink, pmu, mcu, mem, sm, inforom, thermal, power, driver,
    // nvswitch...), DCGM's verdict (warn, fail) and its message. `cleared`: the incident went away.
    std::string code, system, health, message;
    bool cleared = false;
};

// The line, reading like DCGM's own messages:
//   XID 79 on GPU 3
//   Double-bit ECC error on GPU 3: 2 errors in device
//   PCIe replay errors on GPU 3: counter 120
//   Retired pages limit on GPU 3: 0 single-bit, 64 double-bit
//   Thermal violation on GPU 3: 95 C
//   Power violation on GPU 3: 720 W
//   NVLink errors on GPU 3: counter 12 (field 449)
//   DCGM_FR_VOLATILE_DBE_DETECTED on GPU 3 (mem, fail): <DCGM's message>
//   DCGM_FR_VOLATILE_DBE_DETECTED on GPU 3 (mem) cleared
// DCGM's texts (message, location, system, health, code) are escaped (escape_line) and cut to
// kMaxText bytes; a field of the first lines is never more than digits. Bytes DCGM sends are
// DCGM's, but the line must stay one line whatever they are.
inline constexpr size_t kMaxText = 1024;
std::string format_line(const Event& e);

// The event a line shows (pci_bdf and ts_us are not in the text: take them from the metadata and
// the line's time); nullopt when the line is not one of format_line's.
std::optional<Event> parse_line(std::string_view line);

// The catalogue verdict: an Xid gets what the kernel rule gives the same code
// (events::xid_event), a double-bit ECC error what Xid 48 gets; retired pages error; NVLink
// errors error; PCIe replays, thermal and power violations warning; a health incident error when
// DCGM says fail, warning when warn, info when cleared.
events::Severity severity(const Event& e);

// The structured metadata of the line (node::metadata keys): gpu, pci_bdf (when known), event,
// xid (kXid only), severity. The job attribution is the shipper's stages' (slurm_job_id,
// attribution), as for kernel records.
std::vector<std::pair<std::string, std::string>> metadata(const Event& e);

}  // namespace jobtrail::dcgm
