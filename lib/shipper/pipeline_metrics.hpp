#pragma once

#include "shipper/metrics.hpp"

namespace jobtrail::shipper {

// The main loop's: what the sources gave, what the spool took, and the internal events.
struct PipelineMetrics {
    explicit PipelineMetrics(Metrics& m)
        : read(m.counter("jobtrail_shipper_records_read_total",
                         "Records read from all sources (before the stages drop any).")),
          spooled(m.counter("jobtrail_shipper_records_spooled_total", "Records made durable in the spool.")),
          spool_full(m.counter("jobtrail_shipper_spool_full_total", "Passes where sources paused on a full spool.")),
          source_backlog_bytes(m.gauges("jobtrail_shipper_source_backlog_bytes",
                                        "Bytes written to a source and not read yet.", {"source"})),
          source_last_read(m.gauges("jobtrail_shipper_source_last_read_timestamp_seconds",
                                    "Timestamp of the newest record read, per source.", {"source"},
                                    metrics::Unit::kNanosAsSeconds)),
          events(m.counters("jobtrail_shipper_internal_events_total",
                            "Named events of the shipper's components (a source that cannot open its input, a "
                            "refused file, a rejected push), by component and event.",
                            {"component", "event"})) {}
    metrics::Counter &read, &spooled, &spool_full;
    metrics::GaugeFamily &source_backlog_bytes, &source_last_read;
    metrics::CounterFamily& events;
};

}  // namespace jobtrail::shipper
