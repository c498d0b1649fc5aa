#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/fs.hpp"
#include "config/config.hpp"
#include "kmsg/boot_clock.hpp"
#include "shipper/event.hpp"
#include "shipper/internal_events.hpp"
#include "shipper/lanes.hpp"
#include "shipper/metrics.hpp"
#include "shipper/metrics_server.hpp"
#include "shipper/pipeline_metrics.hpp"
#include "shipper/sender.hpp"
#include "shipper/sources/registry.hpp"
#include "shipper/sources/source.hpp"
#include "shipper/stages/stages.hpp"
#include "spool/spool.hpp"

namespace jobtrail::shipper {

class SelfSource;

struct RunOptions {
    bool once = false;  // ship what is readable now, wait for Loki's acknowledgement, exit
    int64_t once_timeout_ms = 120'000;
    bool dry_run = false;  // print what would be sent; touch no position, no spool
};

// sources -> stages -> spool lanes -> senders. The main thread polls the sources, runs the
// stages, appends each source's records to its lane (lanes.hpp), syncs the lanes and only then
// commits the sources' positions; each lane's sender thread drains it to Loki. Building the sources is the registry's
// (sources/registry.hpp), recovery at start recovery.hpp's, --dry-run dry_run.hpp's; each
// component declares its own metrics (metrics/registry.hpp); this is the main loop and the group
// commit.
class Pipeline {
public:
    // Tests hand in their own sources; by default the registry builds the configured ones.
    using SourceFactory = std::function<std::vector<std::unique_ptr<Source>>(const SourceContext&)>;
    explicit Pipeline(const config::Config& cfg, SourceFactory sources = {});
    ~Pipeline();
    // Returns the process exit status.
    int run(const RunOptions& opts, const std::atomic<bool>& stop);
    Metrics& metrics() { return metrics_; }
    std::string render_metrics() const;

private:
    struct LaneState {
        spool::Spool spool;
        uint64_t max_bytes = 0;         // this lane's share of spool.max_size
        uint64_t pass_bytes = 1 << 20;  // line bytes per source per pass
        size_t sources = 0;
        bool paused = false;  // full this pass: its sources are not polled
        bool full_logged = false;
    };
    LaneState& lane_for(const Source& s) { return lanes_[lane_index(lane_of(s.kind()))]; }
    uint64_t pending_bytes() const;

    void on_event(const InternalEvent& e);
    void note(Severity s, std::string_view name, const std::string& msg) const;
    int main_loop(const RunOptions& opts, const std::atomic<bool>& stop);
    // The metrics endpoint never holds up shipping: a port another process holds is said on the
    // shipper's own stream and tried again every kMetricsRetryNs.
    void start_metrics(Result<Fd> passed);
    void bind_metrics();
    static constexpr int64_t kMetricsRetryNs = 30'000'000'000;
    static constexpr int64_t kMetricsRepeatNs = 600'000'000'000;  // the error said again while it lasts
    int64_t metrics_retry_ns_ = 0;                                // 0: bound, or not wanted
    int64_t metrics_said_ns_ = 0;                                 // when the error was last said
    // closing: no source is read; what the stages still have to say is committed (at stop).
    bool pass(std::vector<Event>& scratch, bool final_flush, bool closing = false);
    void idle_wait(int timeout_ms);  // until a source has something new, or the timeout
    static constexpr int64_t kWokenCommitGapNs = 100'000'000;
    int64_t commit_due_ns_ = 0;  // a commit put off for this long (0: none)

    const config::Config& cfg_;
    // Structured metadata is spooled only for a Loki that takes it: the spool's runs go out as
    // they are, and one holding metadata would be decompressed to leave it out.
    const bool metadata_;
    SourceFactory make_sources_;
    NodeInfo node_;
    mutable Metrics metrics_;
    PipelineMetrics& pm_;
    Events events_;
    kmsg::BootClock clock_;
    std::vector<std::unique_ptr<Source>> sources_;
    SelfSource* self_ = nullptr;  // one of sources_: the shipper's own stream
    std::unique_ptr<Stages> stages_;
    Fd state_lock_;  // <state_dir>/shipper.lock, held for the run
    std::array<LaneState, kLanes> lanes_;
    bool reading_ = false;          // a source polled in the last pass has more right away
    bool checkpoint_dirty_ = true;  // write one at start even if nothing new is read
    bool spool_broken_ = false;     // a lane's write-back failed: run() exits
    bool commit_failed_ = false;    // the last commit failed: sources wait until one succeeds
    std::string checkpoint_path_;
    uint64_t uncommitted_ = 0;            // records appended since the last checkpoint
    std::vector<spool::RecordRef> refs_;  // a pass's records, kept for its capacity
    MetricsServer metrics_server_;        // last: stopped before what it renders goes
    bool can_defer_commit() const;        // few enough unsynced bytes that the commit may wait
    int64_t last_commit_ns_ = 0;
};

}  // namespace jobtrail::shipper
