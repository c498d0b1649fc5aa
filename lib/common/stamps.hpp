#pragma once

#include <cstdint>

#include "common/time.hpp"

namespace jobtrail {

// Stamps for one stream of lines: each strictly after the one before (+1 ns at least), even
// within one clock tick or when the wall clock steps back. Loki keeps one entry per (stream,
// timestamp, line) and drops entries far behind the stream's newest, so a log file's lines
// must never share or go back in time.
class StrictStamps {
public:
    int64_t next(int64_t want) {
        last_ = want > last_ ? want : last_ + 1;
        return last_;
    }
    int64_t now() { return next(realtime_ns()); }
    int64_t last() const { return last_; }

private:
    int64_t last_ = INT64_MIN;
};

}  // namespace jobtrail
