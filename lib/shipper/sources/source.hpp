#pragma once

#include <string>
#include <vector>

#include "shipper/event.hpp"

namespace jobtrail::shipper {

// A source reads lines and keeps its own position. The pipeline calls poll(), puts the events
// in the spool, syncs it, and only then calls commit(): a position never passes a line that is
// not durable in the spool.
class Source {
public:
    virtual ~Source() = default;
    virtual const std::string& name() const = 0;
    // Appends what is readable now (bounded by max_bytes); returns true if more is waiting.
    virtual bool poll(std::vector<Event>& out, size_t max_bytes) = 0;
    // Everything the last polls returned is durable: persist the position.
    virtual void commit() = 0;
    // Emits lines held back (a last line without newline) as they are: for --once and shutdown.
    virtual void flush_partial(std::vector<Event>&) {}
};

}  // namespace jobtrail::shipper
