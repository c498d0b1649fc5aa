#pragma once

#include <cstdint>

namespace jobtrail::shipper {

// systemd's notify protocol (Type=notify, WatchdogSec=): READY once recovery is done, and a
// watchdog ping only while the main loop makes progress, so a shipper stuck anywhere is
// restarted. No-ops outside systemd or in a build without libsystemd.
class ServiceNotify {
public:
    ServiceNotify();
    void ready();
    void stopping();
    // Called after each completed pass; pings at half the watchdog interval.
    void progress(int64_t now_ns);
    bool watchdog_enabled() const { return interval_ns_ > 0; }

private:
    int64_t interval_ns_ = 0;
    int64_t last_ns_ = 0;
};

}  // namespace jobtrail::shipper
