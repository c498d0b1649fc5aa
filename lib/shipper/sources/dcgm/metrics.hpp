#pragma once

#include "shipper/metrics.hpp"

namespace jobtrail::shipper {

struct DcgmMetrics {
    explicit DcgmMetrics(Metrics& m)
        : connected(m.gauge("jobtrail_shipper_dcgm_connected",
                            "1 while the dcgm source is connected to DCGM's host engine and registered, else 0.")),
          connect_failures(m.counter("jobtrail_shipper_dcgm_connect_failures_total",
                                     "Attempts to load libdcgm, connect to the host engine or register that failed.")),
          events(m.counter("jobtrail_shipper_dcgm_events_total",
                           "DCGM violations and health incidents (appearing or clearing) shipped as lines.")),
          queue_drops(m.counter("jobtrail_shipper_dcgm_queue_drops_total",
                                "DCGM violations dropped because the source's queue was full (queue_size).")) {}
    metrics::Gauge& connected;
    metrics::Counter& connect_failures;
    metrics::Counter& events;
    metrics::Counter& queue_drops;
};

}  // namespace jobtrail::shipper
