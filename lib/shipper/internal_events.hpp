#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>

// Named events of the shipper's components (Vector's internal_events): a source that cannot open
// its device, a file refused, a push rejected. Each is counted by (component, name) in /metrics,
// written to stderr and, for warnings and errors, to the shipper's own stream (rate-limited).
// The severity is said by whoever emits, never guessed from the text.
namespace jobtrail::shipper {

enum class Severity { kInfo, kWarning, kError };
std::string_view severity_name(Severity s);

// The names, one list: each is a metric label (jobtrail_shipper_internal_events_total{event=...}), so a
// dashboard or alert that names one keeps working only while it is spelt here once.
namespace event {
// Sources: cannot open what they read (kmsg, the journal), a read of it failed, and read it
// again; one configured that this build lacks (journald).
inline constexpr std::string_view kOpenFailed = "open_failed";
inline constexpr std::string_view kReadFailed = "read_failed";
inline constexpr std::string_view kOpened = "opened";
inline constexpr std::string_view kNotBuilt = "not_built";
// The dcgm source: libdcgm or the host engine unavailable (said once per outage), connected and
// registered, the connection lost (a host engine restart), violations DCGM raised while nobody
// was registered (it does not replay them), violations dropped on a full queue.
inline constexpr std::string_view kDcgmUnavailable = "dcgm_unavailable";
inline constexpr std::string_view kDcgmConnected = "dcgm_connected";
inline constexpr std::string_view kDcgmGpuUndescribed = "dcgm_gpu_undescribed";
inline constexpr std::string_view kDcgmLost = "dcgm_lost";
inline constexpr std::string_view kDcgmNotReplayed = "dcgm_not_replayed";
inline constexpr std::string_view kDcgmQueueFull = "dcgm_queue_full";
// File sources: a pattern that cannot be expanded, a file not read (symlink, not regular,
// unreadable), past max_files or max_files_per_dir, a partial line cut at its bound.
inline constexpr std::string_view kGlobFailed = "glob_failed";
inline constexpr std::string_view kFileRefused = "file_refused";
inline constexpr std::string_view kTooManyFiles = "too_many_files";
inline constexpr std::string_view kPartialLinesCut = "partial_lines_cut";
// The sender: Loki's credentials unreadable, an acknowledgement the spool did not take, a spool
// run that cannot be read; then Loki's answers (sender/policy.cpp).
inline constexpr std::string_view kCredentialsUnreadable = "credentials_unreadable";
inline constexpr std::string_view kAckFailed = "ack_failed";
inline constexpr std::string_view kSpoolCorrupt = "spool_corrupt";
inline constexpr std::string_view kRejected = "rejected";
inline constexpr std::string_view kEntryTooLarge = "entry_too_large";
inline constexpr std::string_view kPushFailed = "push_failed";
inline constexpr std::string_view kAuthFailed = "auth_failed";
inline constexpr std::string_view kTenantRateLimited = "tenant_rate_limited";
inline constexpr std::string_view kStreamRateLimited = "stream_rate_limited";
inline constexpr std::string_view kEntryOverStreamLimit = "entry_over_stream_limit";
// The pipeline: its spool, state, checkpoints and passes.
inline constexpr std::string_view kSpoolFull = "spool_full";
inline constexpr std::string_view kSpoolSyncFailed = "spool_sync_failed";
inline constexpr std::string_view kCheckpointFailed = "checkpoint_failed";
inline constexpr std::string_view kStateDir = "state_dir";
inline constexpr std::string_view kBootClock = "boot_clock";
inline constexpr std::string_view kStateLocked = "state_locked";
inline constexpr std::string_view kSpoolOpenFailed = "spool_open_failed";
inline constexpr std::string_view kSpoolRecovered = "spool_recovered";
inline constexpr std::string_view kSpoolRecoveryFailed = "spool_recovery_failed";
inline constexpr std::string_view kMetricsListenFailed = "metrics_listen_failed";
inline constexpr std::string_view kMetricsListening = "metrics_listening";
inline constexpr std::string_view kNoLoki = "no_loki";
inline constexpr std::string_view kSpoolBroken = "spool_broken";
inline constexpr std::string_view kPassFailed = "pass_failed";
inline constexpr std::string_view kOnceTimeout = "once_timeout";
inline constexpr std::string_view kAckPersistFailed = "ack_persist_failed";
}  // namespace event

struct InternalEvent {
    Severity severity = Severity::kInfo;
    std::string component;  // a source's name, "sender", "spool", "pipeline"
    std::string name;       // what happened, one of event::, as a metric label
    std::string message;    // for people: what and where
};

class Events {
public:
    using Sink = std::function<void(const InternalEvent&)>;
    Events() = default;
    explicit Events(Sink sink) : sink_(std::move(sink)) {}
    void emit(Severity s, std::string component, std::string_view name, std::string message) const {
        if (sink_) sink_({s, std::move(component), std::string(name), std::move(message)});
    }

private:
    Sink sink_;
};

}  // namespace jobtrail::shipper
