#pragma once

#include <string>

#include "shipper/lanes.hpp"
#include "shipper/metrics.hpp"

namespace jobtrail::shipper {

// The senders' (one per lane, counting together): what Loki took, refused and asked of us.
struct SenderMetrics {
    explicit SenderMetrics(Metrics& m)
        : sent(m.counter("jobtrail_shipper_records_sent_total", "Records Loki acknowledged.")),
          sent_bytes(m.counter("jobtrail_shipper_bytes_sent_total", "Line bytes Loki acknowledged.")),
          pushes(m.counter("jobtrail_shipper_push_requests_total", "Push requests made.")),
          retries(m.counter("jobtrail_shipper_retries_total", "Pushes retried (429, 5xx, transport errors).")),
          last_success(m.gauge("jobtrail_shipper_last_success_timestamp_seconds", "Last acknowledged push.",
                               metrics::Unit::kNanosAsSeconds)),
          // Limits Loki named in a 429 (bytes/s; 0: none seen): the sender sizes and paces pushes below them.
          loki_limit(m.gauges("jobtrail_shipper_loki_limit_bytes_per_second",
                              "Rate limits Loki named in a 429 (0: none seen); pushes are sized and paced below them.",
                              {"limit"})),
          lane_last_success(m.gauges("jobtrail_shipper_lane_last_success_timestamp_seconds",
                                     "Last acknowledged push, per spool lane.", {"lane"},
                                     metrics::Unit::kNanosAsSeconds)),
          rejected(m.counters("jobtrail_shipper_rejected_total", "Entries Loki rejected, by reason.", {"reason"})) {
        loki_limit.set({"tenant"}, 0);
        loki_limit.set({"per_stream"}, 0);
        for (size_t i = 0; i < kLanes; ++i) lane_last_success.set({std::string(lane_name(static_cast<Lane>(i)))}, 0);
    }
    int64_t tenant_rate_limit() const { return loki_limit.value({"tenant"}); }
    int64_t stream_rate_limit() const { return loki_limit.value({"per_stream"}); }
    metrics::Counter &sent, &sent_bytes, &pushes, &retries;
    metrics::Gauge& last_success;
    metrics::GaugeFamily &loki_limit, &lane_last_success;
    metrics::CounterFamily& rejected;
};

}  // namespace jobtrail::shipper
