#pragma once

#include "shipper/metrics.hpp"

namespace jobtrail::shipper {

struct KmsgMetrics {
    explicit KmsgMetrics(Metrics& m)
        : lost(m.counter("jobtrail_shipper_kmsg_lost_total", "Kernel records overwritten before they were read.")) {}
    metrics::Counter& lost;
};

}  // namespace jobtrail::shipper
