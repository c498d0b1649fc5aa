#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "shipper/lanes.hpp"
#include "shipper/metrics.hpp"

namespace jobtrail::shipper {

// The spool lanes': what each holds that Loki has not acknowledged, sampled at each scrape.
struct LaneMetrics {
    explicit LaneMetrics(Metrics& m)
        : bytes(m.gauge("jobtrail_shipper_spool_bytes", "Unacknowledged bytes in the spool.")),
          lane_bytes(m.gauges("jobtrail_shipper_spool_lane_bytes",
                              "Unacknowledged bytes in each spool lane (node: kernel, job logs, journal, fabric "
                              "manager; jobs: NCCL).",
                              {"lane"})),
          // The unlabelled age is the node lane's: its timestamps are the kernel's and root's,
          // while a job's user writes the NCCL lines' own.
          oldest_age(m.gauge("jobtrail_shipper_spool_oldest_age_seconds",
                             "Age of the oldest record of the node lane (kernel, job logs, journal) Loki has not "
                             "acknowledged (0: none).")),
          lane_oldest_age(m.gauges("jobtrail_shipper_lane_oldest_age_seconds",
                                   "Age of the oldest unacknowledged record, per spool lane, by the record's own "
                                   "timestamp (0: none).",
                                   {"lane"})) {
        sample({}, 0);
    }
    // Sets the gauges from each lane's unacknowledged bytes, now.
    void sample(const std::array<uint64_t, kLanes>& pending, int64_t now_ns) {
        uint64_t total = 0;
        for (size_t i = 0; i < kLanes; ++i) {
            const std::string lane(lane_name(static_cast<Lane>(i)));
            const int64_t o = oldest_pending_ns[i];
            const int64_t age = o && pending[i] ? std::max<int64_t>(0, now_ns - o) / 1'000'000'000 : 0;
            total += pending[i];
            lane_bytes.set({lane}, static_cast<int64_t>(pending[i]));
            lane_oldest_age.set({lane}, age);
            if (static_cast<Lane>(i) == Lane::kNode) oldest_age = age;
        }
        bytes = static_cast<int64_t>(total);
    }
    metrics::Gauge& bytes;
    metrics::GaugeFamily& lane_bytes;
    metrics::Gauge& oldest_age;
    metrics::GaugeFamily& lane_oldest_age;
    // The timestamp of each lane's oldest unacknowledged record (0: none), kept by its sender.
    std::array<std::atomic<int64_t>, kLanes> oldest_pending_ns{};
};

}  // namespace jobtrail::shipper
