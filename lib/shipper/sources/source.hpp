#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "kmsg/boot_clock.hpp"
#include "node/schema.hpp"
#include "shipper/event.hpp"
#include "shipper/internal_events.hpp"
#include "shipper/metrics.hpp"

namespace jobtrail::shipper {

// A source reads lines and knows its position. The pipeline polls every source, puts the events
// in the spool, syncs it, and then writes all sources' checkpoint() together with the spool's
// end in one durable file: a position never passes a line that is not durable in the spool, and
// after a crash the spool is cut back to that file, so no line is in the spool twice.
class Source {
public:
    virtual ~Source() = default;
    virtual const std::string& name() const = 0;
    // What it reads, which decides its spool lane (lanes.hpp).
    virtual node::StreamKind kind() const { return node::StreamKind::kOther; }
    // Appends what is readable now (bounded by max_bytes); returns true if more is waiting.
    virtual bool poll(std::vector<Event>& out, size_t max_bytes) = 0;
    // The position after everything poll() returned, and its restoration at start.
    virtual nlohmann::json checkpoint() const = 0;
    virtual void restore(const nlohmann::json& state) = 0;
    // Emits lines held back (a last line without newline) as they are: for --once and shutdown.
    virtual void flush_partial(std::vector<Event>&) {}
    // Bytes written to the source but not read yet, as of the last poll; -1 if unknowable.
    virtual int64_t backlog_bytes() const { return -1; }
    // The events of its last poll, spooled: a source may take their line buffers back for the
    // next lines (one allocation and free per line was a tenth of the shipper's instructions).
    virtual void recycle(std::vector<Event>&) {}
    // A descriptor that becomes readable when there is something new to read (-1: none); the
    // idle pipeline waits on these instead of sleeping out its poll interval. woken() drains it.
    virtual int wake_fd() const { return -1; }
    virtual void woken() {}
};

// What a source may need from the shipper when it is built (kind.hpp's K::build).
struct SourceContext {
    const config::Config& cfg;
    const NodeInfo& node;
    Metrics& metrics;
    const Events& events;
    const kmsg::BootClock& clock;
};

}  // namespace jobtrail::shipper
