#pragma once

#include <cstdint>
#include <string>

#include "shipper/metrics/registry.hpp"

namespace jobtrail::shipper {

// The shipper's /metrics: each component declares its own metrics in a group beside its code
// (pipeline_metrics.hpp, lane_metrics.hpp, sender/metrics.hpp, sources/<kind>/metrics.hpp) and
// gets it with metrics.group<G>().
using Metrics = metrics::Registry;

// Records dropped on purpose, by reason: the stages, sources and senders all drop.
struct Drops {
    explicit Drops(Metrics& m)
        : by_reason(m.counters("jobtrail_shipper_dropped_total", "Records dropped, by reason.", {"reason"})) {}
    void operator()(const std::string& reason, uint64_t n = 1) { by_reason.add({reason}, n); }
    uint64_t of(const std::string& reason) const { return by_reason.value({reason}); }
    metrics::CounterFamily& by_reason;
};

}  // namespace jobtrail::shipper
