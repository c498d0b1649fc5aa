#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "devices/attribution.hpp"
#include "events/extractor.hpp"
#include "kmsg/boot_clock.hpp"
#include "kmsg/record.hpp"

namespace jobtrail::collector {

struct RingScan {
    bool ok = true;
    std::string error;
    uint64_t records = 0;
    uint64_t lost = 0;  // overwritten while we read (EPIPE / seq gaps)
    bool budget_exhausted = false;
    bool any = false;
    uint64_t last_seq = 0;
};

// Reads the kernel ring once, oldest to newest, without blocking, giving every record to
// on_record (raw bytes of one read) and every loss to on_lost. Stops at the end of the ring or
// when budget_ms is spent, whichever comes first: a collector must never hang on kmsg.
RingScan scan_ring(const std::string& path, int64_t budget_ms,
                   const std::function<void(std::string_view raw, uint64_t seq)>& on_record,
                   const std::function<void(uint64_t lost)>& on_lost);

// One recognised event, grouped: identical (kind, rule, xid, device, owner) occurrences count
// together.
struct EventHit {
    events::Event event;
    uint64_t first_seq = 0;
    int64_t first_ns = 0;
    std::string first_message;
    uint64_t count = 0;
    // Whose it was, with an attributor: this_job, other_job, node (empty without one), and in
    // words: "on GPU 1 (0000:3b:00.0, serial …), owned by this job".
    std::string owner, owner_job, attribution;
};

// Collects events from records, grouped and in order of first appearance.
class EventTally {
public:
    explicit EventTally(const events::Extractor& ex) : ex_(ex) {}
    // Attribute every record (devices/attribution.hpp) and say it for `self`, the job whose
    // records these are.
    void attribute_with(devices::Attributor* a, std::string self) {
        attributor_ = a;
        self_ = std::move(self);
    }
    // Returns the event found in this record, if any.
    const events::Event* add(const kmsg::Record& r, int64_t ts_ns);
    const std::vector<EventHit>& hits() const { return hits_; }
    uint64_t count(events::Severity s) const;

private:
    const events::Extractor& ex_;
    std::vector<EventHit> hits_;
    devices::Attributor* attributor_ = nullptr;
    std::string self_;
};

// logfmt description of a hit for the `event` lines of a job log.
std::string describe_hit(const EventHit& h);

}  // namespace jobtrail::collector
