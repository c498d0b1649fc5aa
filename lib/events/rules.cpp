#include "events/rules.hpp"

#include <array>

namespace jobtrail::events {
namespace {

using S = Severity;

// Formats from ../shared/reference/protocols-and-peers.md (E2, E3) and the kernel sources.
// Every pattern is anchored at the start of the kernel message, and the device rules' fixed
// prefix up to their first field is longer than a comm (15 bytes): lines such as "<comm>[pid]:
// segfault at ... in <binary>" put user-chosen text first and last, which must never read as an
// Xid.
constexpr std::array kRules = {
    // Crashes in user processes. First: these lines start with the comm and end with the binary's
    // name, both the user's choice, so a line of this shape is a crash whatever else it says.
    Rule{"segfault", "segfault", "segfault at",
         R"(^(?P<comm>.+?)\[(?P<pid>\d+)\]: (?P<detail>segfault at [0-9a-fA-F]+ ip [0-9a-fA-F]+.*))", S::kError,
         "A user process crashed (segmentation fault)", "application bug or bad library; check the job's stderr", 0},
    Rule{"general-protection", "segfault", "general protection",
         R"(^(?:traps: )?(?P<comm>.+?)\[(?P<pid>\d+)\] (?P<detail>general protection(?: fault)?.*))", S::kError,
         "A user process crashed (general protection fault)", "application bug or bad library; check the job's stderr",
         0},
    // NVIDIA Xid: "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    // and the older form without "PCI:".
    Rule{
        "xid", "xid", "NVRM: Xid",
        R"(^NVRM: Xid \((?:PCI:)?(?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)\)[^:]*: (?P<xid>\d+),\s*(?P<detail>.*))",
        S::kWarning, "", "", 0},
    // Xid 79 as printed without the word Xid.
    Rule{
        "xid79-no-xid-word", "xid", "fallen off the bus",
        R"(^NVRM: (?:The NVIDIA )?GPU (?:at PCI:)?(?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)\b.*fallen off the bus)",
        S::kFatal, "", "", 79},
    // NVSwitch errors, documented in the Fabric Manager guide.
    Rule{
        "sxid", "sxid", "SXid",
        R"(^nvidia-nvswitch\d*: SXid \((?:PCI:)?(?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)\): (?P<xid>\d+),\s*(?P<detail>.*))",
        S::kError, "NVSwitch error (SXid)", "check fabric manager logs and the NVSwitch SXid table", 0},
    // mlx5 firmware command timeouts: the HCA stopped answering its driver.
    Rule{
        "mlx5-cmd-timeout", "mlx5", "mlx5_core",
        R"(^mlx5_core (?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]):? .*?(?P<detail>(?:wait_func|cmd\[\d+\]).*?timeout.*))",
        S::kFatal, "ConnectX firmware command timeout",
        "drain the node; check the HCA firmware (mlxfwmanager) and reset the device", 0},
    Rule{
        "mlx5-health", "mlx5", "mlx5_core",
        R"(^mlx5_core (?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]):? .*?(?P<detail>health compromised.*|Fatal error \d+ detected.*|unrecoverable hardware error.*|FW is unable to respond.*))",
        S::kFatal, "ConnectX device health failure", "drain the node; the HCA needs a reset or replacement", 0},
    Rule{
        "mlx5-pcie-power", "mlx5", "insufficient power",
        R"(^mlx5_core (?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]):? .*?(?P<detail>insufficient power on the PCIe slot.*))",
        S::kWarning, "ConnectX card reports insufficient PCIe slot power", "check the slot and the card's power budget",
        0},
    Rule{
        "mlx5-cable", "mlx5", "Port module event",
        R"(^mlx5_core (?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]):? .*?Port module event\[error\]: (?P<detail>.*))",
        S::kError, "Network cable or transceiver module error", "check or replace the cable/transceiver on that port",
        0},
    Rule{
        "mlx5-module", "mlx5", "Port module event",
        R"(^mlx5_core (?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]):? .*?Port module event: (?P<detail>.*))",
        S::kInfo, "Network cable or transceiver module plugged or unplugged", "no action unless unexpected", 0},
    Rule{
        "mlx5-tx-timeout", "mlx5", "timed out",
        R"(^(?:mlx5_core (?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) \S+: )?(?P<detail>NETDEV WATCHDOG: .*\(mlx5_core\).*timed out.*))",
        S::kWarning, "Network transmit queue timeout on a ConnectX port",
        "watch the port; frequent timeouts point at the fabric", 0},
    // Counter readers on restricted PFs trigger this; it is noise (gpud#1164) but worth knowing.
    Rule{
        "mlx5-access-reg", "mlx5", "ACCESS_REG",
        R"(^mlx5_core (?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]):? .*?(?P<detail>ACCESS_REG\(0x[0-9a-fA-F]+\).*failed.*))",
        S::kInfo, "Register access refused by restricted firmware (usually a counter reader)",
        "no action; rate-limit the reader", 0},
    // PCIe Advanced Error Reporting: "AER: [Multiple ]Uncorrected (Fatal) error received: <bdf>" (older
    // kernels), "AER: [Multiple ]Uncorrectable (Non-Fatal) error message received from <bdf>" (newer).
    Rule{
        "pcie-aer-fatal", "pcie", "AER:",
        R"(^(?:pcieport|nvidia|mlx5_core) (?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): AER: (?P<detail>(?:Multiple )?(?:Uncorrected|Uncorrectable) \((?:Fatal|Non-Fatal)\).*))",
        S::kFatal, "Uncorrectable PCIe error", "drain the node; check the PCIe link of that device", 0},
    Rule{
        "pcie-aer-corrected", "pcie", "AER:",
        R"(^(?:pcieport|nvidia|mlx5_core) (?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): AER: (?P<detail>(?:Multiple )?Correct(?:ed|able) error.*))",
        S::kInfo, "Corrected PCIe error", "watch the rate", 0},
    // OOM killer (global and cgroup) with the victim.
    Rule{
        "oom-kill", "oom", "Killed process",
        R"(^(?P<detail>(?:Memory cgroup )?[Oo]ut of memory(?: \([^)]*\))?): Killed process (?P<pid>\d+) \((?P<comm>[^)]*)\))",
        S::kError, "The kernel OOM killer killed a process", "the job ran out of memory: raise --mem or reduce usage",
        0},
    Rule{"hung-task", "hung_task", "blocked for more than",
         R"(^INFO: task (?P<comm>.+?):(?P<pid>\d+) (?P<detail>blocked for more than \d+ seconds.*))", S::kWarning,
         "A task hung in the kernel (often I/O or a driver)", "check storage and driver state on the node", 0},
};

}  // namespace

std::span<const Rule> rules() {
    return kRules;
}

}  // namespace jobtrail::events
