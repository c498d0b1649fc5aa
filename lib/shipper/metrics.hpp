#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "shipper/lanes.hpp"

namespace jobtrail::shipper {

// Counters exported on /metrics. Per-reason maps are guarded by mu.
struct Metrics {
    std::atomic<uint64_t> read{0}, spooled{0}, sent{0}, sent_bytes{0}, retries{0}, pushes{0}, spool_full{0},
        kmsg_lost{0};
    // Unterminated lines shipped before their end to keep a source under max_partial_bytes.
    std::atomic<uint64_t> partial_lines_cut{0};
    // CRI (container) logs: lines that were not CRI, shipped as they are; P lines handed out
    // before their F (longer than max_line_bytes, or left at the end of a rotated file).
    std::atomic<uint64_t> cri_malformed{0}, cri_lines_cut{0};
    std::atomic<int64_t> last_success_ns{0};
    // Per spool lane, the timestamp of the oldest unacknowledged record (0: none), and the last
    // acknowledged push. The jobs lane's timestamps are a user's (NCCL lines carry their own).
    std::array<std::atomic<int64_t>, kLanes> oldest_pending_ns{};
    std::array<std::atomic<int64_t>, kLanes> lane_last_success_ns{};
    // Limits Loki named in a 429 (bytes/s; 0: none seen): the sender sizes and paces pushes below them.
    std::atomic<uint64_t> loki_tenant_rate_limit_bytes{0}, loki_stream_rate_limit_bytes{0};
    std::mutex mu;
    std::map<std::string, uint64_t> dropped;                         // by reason (stage rule, too_old, ...)
    std::map<std::string, uint64_t> rejected;                        // by Loki's reason (400s)
    std::map<std::string, uint64_t> files_refused;                   // by reason (symlink, not_regular, ...)
    std::map<std::pair<std::string, std::string>, uint64_t> events;  // internal events by (component, name)
    std::map<std::string, int64_t> source_backlog_bytes;             // bytes written but not yet read, per source
    std::map<std::string, int64_t> source_last_read_ns;              // newest record read, per source
    void drop(const std::string& reason, uint64_t n = 1) {
        std::lock_guard<std::mutex> lk(mu);
        dropped[reason] += n;
    }
};

// Prometheus text for /metrics; pending is each spool lane's unacknowledged bytes, sampled by
// the caller.
std::string render_metrics(Metrics& m, const std::array<uint64_t, kLanes>& pending);

}  // namespace jobtrail::shipper
