#include "shipper/service_notify.hpp"

#ifdef JOBTRAIL_HAVE_JOURNALD
#include <systemd/sd-daemon.h>
#endif

namespace jobtrail::shipper {

#ifdef JOBTRAIL_HAVE_JOURNALD

ServiceNotify::ServiceNotify() {
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) > 0) interval_ns_ = static_cast<int64_t>(usec) * 1000 / 2;
}

void ServiceNotify::ready() {
    sd_notify(0, "READY=1\nSTATUS=shipping");
}

void ServiceNotify::stopping() {
    sd_notify(0, "STOPPING=1");
}

void ServiceNotify::progress(int64_t now_ns) {
    if (interval_ns_ <= 0 || now_ns - last_ns_ < interval_ns_) return;
    last_ns_ = now_ns;
    sd_notify(0, "WATCHDOG=1");
}

#else  // built without libsystemd: the unit's Type=notify needs it (CMake says so)

ServiceNotify::ServiceNotify() = default;
void ServiceNotify::ready() {}
void ServiceNotify::stopping() {}
void ServiceNotify::progress(int64_t) {}

#endif

}  // namespace jobtrail::shipper
