#pragma once

#include <cstdint>
#include <string>

#include "common/result.hpp"

namespace jobtrail::kmsg {

// Turns kernel monotonic microseconds into wall-clock nanoseconds with an offset derived once
// per boot and persisted, so that every process (prolog, epilog, shipper, restarted or not)
// gives a record the same timestamp. Re-deriving it each time would give re-sent records new
// timestamps and defeat Loki's deduplication.
class BootClock {
public:
    // Loads the offset for the current boot from state_dir/boot-offset, creating it if the file
    // is missing or belongs to another boot. Falls back to an in-memory offset (and says why in
    // err) when the state directory is not writable: timestamps are then still right, only not
    // guaranteed identical across processes.
    Status load(const std::string& state_dir);

    // For tests and tools: a fixed boot id and offset.
    void set(std::string boot_id, int64_t offset_ns) {
        boot_id_ = std::move(boot_id);
        offset_ns_ = offset_ns;
    }

    // Saturates instead of overflowing: usec is whatever the record said.
    int64_t wall_ns(uint64_t usec) const {
        int64_t ns = 0;
        if (usec > static_cast<uint64_t>(INT64_MAX / 1000) ||
            __builtin_add_overflow(offset_ns_, static_cast<int64_t>(usec) * 1000, &ns))
            return INT64_MAX;  // only a positive offset plus a huge usec can overflow
        return ns;
    }
    // A record's own time: its microsecond plus a sub-microsecond part from its sequence number.
    // Records printed in one microsecond (three identical mlx5 lines) stay distinct in Loki,
    // which keeps one entry per (stream, timestamp, line), and a re-read gives the same value.
    int64_t record_ns(uint64_t usec, uint64_t seq) const {
        const int64_t ns = wall_ns(usec);
        if (ns == INT64_MAX) return ns;
        return ns - ns % 1000 + static_cast<int64_t>(seq % 1000);
    }
    // The kernel-time (usec) that corresponds to a wall-clock instant.
    uint64_t usec_at(int64_t wall_ns) const {
        return wall_ns <= offset_ns_ ? 0 : static_cast<uint64_t>((wall_ns - offset_ns_) / 1000);
    }
    const std::string& boot_id() const { return boot_id_; }
    int64_t offset_ns() const { return offset_ns_; }

    static std::string current_boot_id();

private:
    std::string boot_id_;
    int64_t offset_ns_ = 0;
};

}  // namespace jobtrail::kmsg
