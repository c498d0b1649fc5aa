#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "loki/push.hpp"

namespace jobtrail::shipper {

// One line on its way from a source, through the stages, into the spool.
struct Event {
    int64_t ts_ns = 0;  // fixed here, at first read: a re-send is byte-identical
    loki::LabelSet labels;
    std::string line;
    std::vector<std::pair<std::string, std::string>> metadata;
    bool dropped = false;
};

struct NodeInfo {
    std::string cluster;
    std::string node;
};

// Counters exported on /metrics. Per-reason maps are guarded by mu.
struct Metrics {
    std::atomic<uint64_t> read{0}, spooled{0}, sent{0}, sent_bytes{0}, retries{0}, pushes{0}, spool_full{0},
        kmsg_lost{0};
    std::atomic<int64_t> last_success_ns{0};
    std::mutex mu;
    std::map<std::string, uint64_t> dropped;   // by reason (stage rule, too_old, ...)
    std::map<std::string, uint64_t> rejected;  // by Loki's reason (400s)
    std::map<std::string, int64_t> source_lag_ns;
    void drop(const std::string& reason, uint64_t n = 1) {
        std::lock_guard<std::mutex> lk(mu);
        dropped[reason] += n;
    }
};

}  // namespace jobtrail::shipper
