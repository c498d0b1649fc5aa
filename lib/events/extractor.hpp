#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "events/xid_catalogue.hpp"
#include "kmsg/record.hpp"

namespace jobtrail::events {

// A kernel message recognised as something an operator acts on.
struct Event {
    std::string kind;  // xid, sxid, mlx5, pcie, oom, segfault, hung_task
    std::string rule;  // the rule that matched, e.g. "xid", "xid79-no-xid-word", "mlx5-cmd-timeout"
    Severity severity = Severity::kInfo;
    int xid = 0;          // Xid/SXid code when kind is xid or sxid
    std::string pci_bdf;  // device address as printed, e.g. 0000:3b:00
    std::string detail;   // process "comm[pid]", Xid 154 recovery action, cable error text, ...
    std::string meaning;  // what it is
    std::string action;   // what to do
};

// Recognises events in kernel messages with one table of RE2 rules (events/rules.cpp); adding
// a pattern is adding a row there. Each rule has a literal that must appear in the message, so
// the common case (no event) costs a few substring searches.
// An Xid reported by something other than the kernel ring (DCGM's XID policy violation): the same
// catalogue verdict (meaning, action, severity) the kernel rule gives that code.
Event xid_event(int xid, std::string pci_bdf, std::string rule);

class Extractor {
public:
    Extractor();
    ~Extractor();
    Extractor(const Extractor&) = delete;
    Extractor& operator=(const Extractor&) = delete;

    // The first rule that matches a /dev/kmsg record, or nullopt. Only the kernel's own records
    // (facility 0) count: root in a job can write any text to /dev/kmsg, and the kernel then
    // stamps it with a user facility (Documentation/ABI/testing/dev-kmsg).
    std::optional<Event> extract(const kmsg::Record& record) const;

    // The same rules on the message text alone, for callers that no longer have the record
    // (lines read back from Loki, where the shipper keeps only kernel records' events). Rules
    // are anchored at the start of the message: the kernel prints user-chosen names (a
    // process's comm, a binary's path) later in its lines.
    std::optional<Event> extract(std::string_view message) const;

private:
    struct Compiled;
    std::vector<std::unique_ptr<Compiled>> rules_;
};

}  // namespace jobtrail::events
