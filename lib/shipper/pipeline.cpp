#include "shipper/pipeline.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/fs.hpp"
#include "common/time.hpp"
#include "loki/push.hpp"
#include "shipper/dry_run.hpp"
#include "shipper/lane_metrics.hpp"
#include "shipper/listen_fds.hpp"
#include "shipper/metrics_server.hpp"
#include "shipper/recovery.hpp"
#include "shipper/sender/metrics.hpp"
#include "shipper/service_notify.hpp"
#include "shipper/sources/registry.hpp"
#include "shipper/sources/self/self_source.hpp"

namespace jobtrail::shipper {
namespace {

constexpr size_t kPassBytes = 1 << 20;  // per source per pass: bounds memory and the spool check
// The acknowledged position is written at most twice a second (it was an fsync'd file and a
// rename per answered batch, ~10% of the shipper's system time at a million lines a second); a
// kill -9 re-sends at most that long's worth, byte-identical, and Loki keeps each line once.
constexpr int64_t kAckPersistMs = 500;

std::string hostname() {
    char h[256] = {};
    ::gethostname(h, sizeof h - 1);
    std::string s(h);
    return s.substr(0, s.find('.'));
}

}  // namespace

Pipeline::Pipeline(const config::Config& cfg, SourceFactory sources)
    : cfg_(cfg),
      metadata_(cfg.shipper.structured_metadata),
      make_sources_(std::move(sources)),
      pm_(metrics_.group<PipelineMetrics>()),
      events_([this](const InternalEvent& e) { on_event(e); }) {
    // Every component's metrics are on /metrics from the start, those of sources and senders
    // that are not running included (at 0).
    metrics_.group<SenderMetrics>();
    declare_source_metrics(metrics_);
    metrics_.on_render([this, &lanes = metrics_.group<LaneMetrics>()] {
        std::array<uint64_t, kLanes> pending{};
        for (size_t i = 0; i < kLanes; ++i) pending[i] = lanes_[i].spool.pending_bytes();
        lanes.sample(pending, realtime_ns());
    });
    node_.cluster = cfg.cluster.empty() ? "default" : cfg.cluster;
    node_.node = cfg.node.empty() ? hostname() : cfg.node;
}

Pipeline::~Pipeline() = default;

void Pipeline::on_event(const InternalEvent& e) {
    { pm_.events.add({e.component, e.name}); }
    const std::string text = (e.severity == Severity::kInfo ? "" : std::string(severity_name(e.severity)) + ": ") +
                             (e.component == "pipeline" ? "" : e.component + ": ") + e.message;
    std::fprintf(stderr, "jobtrail-shipper: %s\n", text.c_str());
    // Warnings and errors also go to Loki, beside the logs they concern.
    if (self_ && e.severity != Severity::kInfo) self_->note(text);
}

void Pipeline::note(Severity s, std::string_view name, const std::string& msg) const {
    events_.emit(s, "pipeline", name, msg);
}

uint64_t Pipeline::pending_bytes() const {
    uint64_t n = 0;
    for (const auto& l : lanes_) n += l.spool.pending_bytes();
    return n;
}

bool Pipeline::can_defer_commit() const {
    // A commit (an fdatasync per lane, the checkpoint's fsync'd rename) waits for up to 16 passes'
    // worth, never for more than an eighth of a lane: at 4 passes, a backlog read at a million
    // lines a second paid a commit per 4 MiB, a tenth of the shipper's system time.
    for (const auto& l : lanes_) {
        const uint64_t unsynced =
            l.spool.used_bytes_now() - std::min(l.spool.used_bytes_now(), l.spool.pending_bytes());
        if (unsynced >= std::min<uint64_t>(16 * l.pass_bytes, l.max_bytes / 8)) return false;
    }
    return true;
}

bool Pipeline::pass(std::vector<Event>& events, bool final_flush, bool closing) {
    bool more = false;
    reading_ = false;
    for (size_t i = 0; i < kLanes; ++i) {
        LaneState& l = lanes_[i];
        l.paused = false;
        const uint64_t used = l.spool.used_bytes_now();
        const uint64_t room = l.max_bytes - std::min(l.max_bytes, used);
        // A pass can add up to ~3x its line budget to the lane (labels, metadata, framing).
        if (room < (l.sources + 1) * l.pass_bytes * 3) {
            // Only this lane's sources pause; kmsg keeps its position (the ring overrunning is
            // reported as loss).
            if (!l.full_logged)
                note(Severity::kWarning, event::kSpoolFull,
                     "spool lane '" + std::string(lane_name(static_cast<Lane>(i))) + "' is full (" +
                         std::to_string(used) + " bytes); its sources paused until Loki takes more");
            l.full_logged = true;
            l.paused = true;
            ++pm_.spool_full;
            more = true;  // not drained: there is more to read once the lane has room
        } else {
            l.full_logged = false;
        }
    }
    if (commit_failed_) {
        // What was read is not durable yet (a full disk): nothing more is read until it is, so
        // memory holds one commit's worth, not a lane's share of the spool.
        for (auto& l : lanes_) l.paused = true;
        more = true;
    }
    size_t appended = 0;
    for (auto& src : sources_) {
        LaneState& l = lane_for(*src);
        if (l.paused || closing) continue;
        events.clear();
        const bool src_more = src->poll(events, l.pass_bytes);
        more |= src_more;
        reading_ |= src_more;
        if (final_flush) src->flush_partial(events);
        pm_.read += events.size();
        {
            // One lock and one map write per source and pass, not per line.
            int64_t newest = 0;
            for (const auto& e : events) newest = std::max(newest, e.ts_ns);
            if (const int64_t b = src->backlog_bytes(); b >= 0) pm_.source_backlog_bytes.set({src->name()}, b);
            if (newest) pm_.source_last_read.raise({src->name()}, newest);
        }
        stages_->apply(events);
        refs_.clear();
        for (auto& e : events) {
            if (e.dropped) continue;
            add_first_line_metadata(e);
            refs_.push_back(metadata_
                                ? spool::RecordRef{e.ts_ns, e.origin->stream, e.line, &e.origin->metadata, &e.metadata}
                                : spool::RecordRef{e.ts_ns, e.origin->stream, e.line});
        }
        // The room check above leaves space for a whole pass; should a pass still not fit, the
        // lane takes it over its cap (by at most this pass): the sources' positions are already
        // past these records, so they must be durable with them.
        l.spool.append_all(refs_);
        appended += refs_.size();
        src->recycle(events);
    }
    // Lines the stages made themselves (a job's "dropped over its budget"), into their lane.
    events.clear();
    stages_->flush(events, final_flush || closing);
    for (auto& e : events) {
        lanes_[lane_index(lane_of(e.origin->kind))].spool.append(
            metadata_ ? spool::RecordRef{e.ts_ns, e.origin->stream, e.line, &e.origin->metadata, &e.metadata}
                      : spool::RecordRef{e.ts_ns, e.origin->stream, e.line},
            /*past_cap=*/true);
        ++appended;
    }
    if (appended == 0 && uncommitted_ == 0 && !checkpoint_dirty_) return more;  // nothing new, nothing put off
    uncommitted_ += appended;
    // Group commit: one fdatasync per lane + checkpoint per ~200 ms of busy reading, or 100 ms
    // of woken passes (a job trickling lines in costs the node ten a second, not one a line); at
    // once when a few passes are waiting, and for the first line after a quiet spell.
    const int64_t since = monotonic_ns() - last_commit_ns_;
    if (!final_flush && !closing && can_defer_commit() &&
        (reading_ ? since < 200'000'000 : since < kWokenCommitGapNs)) {
        commit_due_ns_ = last_commit_ns_ + (reading_ ? 200'000'000 : kWokenCommitGapNs);
        return more;
    }
    commit_due_ns_ = 0;
    appended = uncommitted_;
    for (auto& l : lanes_)
        if (auto st = l.spool.sync(); !st.ok) {
            note(Severity::kError, event::kSpoolSyncFailed, "spool: " + st.error + "; positions not advanced");
            // A failed write-back cannot be trusted again: exit, and the restart (systemd) cuts
            // the spool back to the checkpoint and reads on from there. Otherwise the next pass
            // tries again: what was read is still to be made durable.
            if (l.spool.broken()) spool_broken_ = true;
            commit_failed_ = true;
            return true;
        }
    // One durable file holds every source's position and the lane ends they correspond to; each
    // sender may read up to its lane's end only. A crash anywhere leaves them consistent.
    LaneEnds ends;
    for (size_t i = 0; i < kLanes; ++i) ends[i] = lanes_[i].spool.durable_end();
    if (auto st = write_file_atomic(checkpoint_path_, checkpoint_text(ends, sources_), 0644,
                                    /*durable=*/cfg_.shipper.spool_fsync);
        !st.ok) {
        note(Severity::kError, event::kCheckpointFailed, "checkpoint: " + st.error);
        commit_failed_ = true;
        return true;  // tried again next pass
    }
    commit_failed_ = false;
    checkpoint_dirty_ = false;
    uncommitted_ = 0;
    last_commit_ns_ = monotonic_ns();
    for (size_t i = 0; i < kLanes; ++i) lanes_[i].spool.set_readable_end(ends[i]);
    pm_.spooled += appended;
    return more;
}

int Pipeline::run(const RunOptions& opts, const std::atomic<bool>& stop) {
    const auto& sc = cfg_.shipper;
    // Taken before any thread starts (it unsets LISTEN_*), served once the own stream exists.
    Result<Fd> passed = take_listen_socket();
    const std::string state = cfg_.collector.state_dir;
    if (auto st = make_dirs(state, 0755); !st.ok) {
        note(Severity::kError, event::kStateDir, st.error);
        return 1;
    }
    if (auto st = clock_.load(state); !st.ok) note(Severity::kWarning, event::kBootClock, "boot clock: " + st.error);
    const SourceContext ctx{cfg_, node_, metrics_, events_, clock_};
    sources_ = make_sources_ ? make_sources_(ctx) : build_sources(ctx);
    auto self = std::make_unique<SelfSource>(node_, metrics_, sc.heartbeat_ms);
    self_ = self.get();
    sources_.push_back(std::move(self));
    if (!opts.once && !opts.dry_run) start_metrics(std::move(passed));
    checkpoint_path_ = state + "/shipper-checkpoint.json";
    for (const auto& src : sources_) ++lane_for(*src).sources;
    for (auto& l : lanes_) {
        // Each lane its half of the spool: a job cannot take the node's share.
        l.max_bytes = sc.spool_max_bytes / kLanes;
        l.pass_bytes = std::clamp<uint64_t>(l.max_bytes / (8 * (l.sources + 1)), 16 << 10, kPassBytes);
    }
    const Checkpoint cp = read_checkpoint(checkpoint_path_);
    restore_sources(cp, sources_);
    stages_ = std::make_unique<Stages>(sc, cfg_.collector.layout(), metrics_, NcclBudget::Clock{}, JobTable::Clock{},
                                       cfg_.collector.slurm_cgroup_roots);

    if (opts.dry_run) {
        print_dry_run(sources_, *stages_, lanes_[0].pass_bytes, stdout);
        return 0;
    }

    // Two shippers on one checkpoint and spool would each send every line.
    auto lock = lock_exclusive(state + "/shipper.lock");
    if (!lock.ok) {
        note(Severity::kError, event::kStateLocked, lock.error + "; refusing to share " + state + " with it");
        return 1;
    }
    state_lock_ = std::move(lock.value);

    const std::string base = sc.spool_dir.empty() ? state + "/spool" : sc.spool_dir;
    for (size_t i = 0; i < kLanes; ++i) {
        const Lane lane = static_cast<Lane>(i);
        LaneState& l = lanes_[i];
        // The node lane is the spool directory itself (as before lanes), the others inside it.
        const std::string dir = lane == Lane::kNode ? base : base + "/" + std::string(lane_name(lane));
        const uint64_t segment = std::clamp<uint64_t>(l.max_bytes / 4, 1 << 20, 16ULL << 20);
        spool::Spool::Recovery rec;
        if (auto st = l.spool.open({dir, segment, l.max_bytes, true, sc.spool_fsync, kAckPersistMs}, &rec); !st.ok) {
            note(Severity::kError, event::kSpoolOpenFailed, "spool: " + st.error);
            return 1;
        }
        if (!rec.note.empty()) note(Severity::kInfo, event::kSpoolRecovered, "spool " + dir + " recovery: " + rec.note);
        if (auto st = recover_spool(l.spool, lane, cp); !st.ok) {
            note(Severity::kError, event::kSpoolRecoveryFailed, "spool " + dir + ": " + st.error);
            return 1;
        }
        // What a lane holds from before (the single spool before lanes, a larger max_size) does
        // not count against its share: its sources, the kernel's included, keep being read. The
        // share is the pass's own reckoning (it appends past the spool's cap).
        if (const uint64_t left = l.spool.pending_bytes(); left > l.max_bytes / 4) l.max_bytes += left;
    }
    return main_loop(opts, stop);
}

void Pipeline::start_metrics(Result<Fd> passed) {
    if (!passed.ok) {
        note(Severity::kError, event::kMetricsListenFailed, "metrics: " + passed.error + "; binding shipper.metrics");
    } else if (passed.value.valid()) {
        metrics_server_.start(std::move(passed.value), [this] { return render_metrics(); });
        note(Severity::kInfo, event::kMetricsListening,
             "metrics: serving on the socket systemd passed (port " + std::to_string(metrics_server_.port()) +
                 "); shipper.metrics is not bound");
        return;
    }
    if (!cfg_.shipper.metrics_listen.empty()) bind_metrics();
}

void Pipeline::bind_metrics() {
    const std::string& listen = cfg_.shipper.metrics_listen;
    const int64_t now = monotonic_ns();
    auto st = metrics_server_.start(listen, [this] { return render_metrics(); });
    if (st.ok) {
        // On the own stream too: scrapes until now may have been answered by whoever held it.
        if (metrics_retry_ns_)
            note(Severity::kWarning, event::kMetricsListening,
                 "metrics: listening on " + listen + " now; until now another process held it");
        metrics_retry_ns_ = 0;
        return;
    }
    if (!metrics_said_ns_ || now - metrics_said_ns_ >= kMetricsRepeatNs) {
        note(Severity::kError, event::kMetricsListenFailed,
             "metrics: " + st.error + "; shipping on without metrics, and whoever holds " + listen +
                 " may answer scrapes in the shipper's name (tried again every 30 s; "
                 "jobtrail-shipper.socket keeps the port from users)");
        metrics_said_ns_ = now;
    }
    metrics_retry_ns_ = now + kMetricsRetryNs;
}

int Pipeline::main_loop(const RunOptions& opts, const std::atomic<bool>& stop) {
    const auto& sc = cfg_.shipper;
    std::atomic<bool> sender_stop{false};
    std::array<std::unique_ptr<Sender>, kLanes> senders;
    // Joined on every way out of this function, exceptions included: a joinable std::thread
    // destroyed while unwinding would abort the process.
    std::array<std::jthread, kLanes> sender_threads;
    if (!sc.loki_url.empty()) {
        for (size_t i = 0; i < kLanes; ++i) {
            // A lane without sources has a sender only for what an earlier configuration left.
            if (lanes_[i].sources == 0 && lanes_[i].spool.pending_bytes() == 0) continue;
            senders[i] = std::make_unique<Sender>(sc, lanes_[i].spool, metrics_, events_, static_cast<Lane>(i));
            sender_threads[i] = std::jthread([&, i] { senders[i]->run(sender_stop); });
        }
    } else {
        note(Severity::kInfo, event::kNoLoki, "no shipper.loki.url configured: spooling only (logs stay on this node)");
    }
    struct StopSender {
        std::atomic<bool>& stop;
        ~StopSender() { stop = true; }
    } stop_sender{sender_stop};
    ServiceNotify service;
    if (!opts.once) service.ready();

    const int64_t deadline = monotonic_ns() + opts.once_timeout_ms * 1'000'000;
    int status = 0;
    std::vector<Event> scratch;
    bool drained_pass = false;
    while (!stop) {
        if (metrics_retry_ns_ && monotonic_ns() >= metrics_retry_ns_) bind_metrics();
        bool more = false;
        try {
            more = pass(scratch, opts.once && drained_pass);
            if (spool_broken_) {
                note(Severity::kError, event::kSpoolBroken,
                     "spool: a write-back to disk failed; exiting so that a restart resumes from the last checkpoint");
                status = 3;
                break;
            }
            service.progress(monotonic_ns());
        } catch (const std::exception& e) {
            // Nothing a source reads may end the shipper: the pass is tried again, and the
            // kernel and the other sources keep shipping.
            note(Severity::kError, event::kPassFailed, std::string("a pass failed and is retried: ") + e.what());
            std::this_thread::sleep_for(std::chrono::seconds(1));
        }
        if (opts.once) {
            const bool sending =
                std::any_of(senders.begin(), senders.end(), [](const auto& s) { return s && s->busy(); });
            if (!more && drained_pass && (pending_bytes() == 0 || sc.loki_url.empty()) && !sending) break;
            drained_pass = !more;
            if (monotonic_ns() > deadline) {
                note(Severity::kError, event::kOnceTimeout,
                     "--once: " + std::to_string(pending_bytes()) +
                         " bytes not acknowledged by Loki within the timeout; they stay in the spool");
                status = 2;
                break;
            }
        }
        if (!reading_) {
            // A commit put off waits no longer than it was put off for.
            int wait_ms = opts.once ? 50 : 250;
            if (commit_due_ns_)
                wait_ms = static_cast<int>(
                    std::clamp<int64_t>((commit_due_ns_ - monotonic_ns()) / 1'000'000 + 1, 1, wait_ms));
            idle_wait(wait_ms);
        }
    }
    // SIGTERM: what was read is durable (pass() synced it), and so is what the stages have yet
    // to say (a job's budget drops); the sender stops within one request timeout, leaving the
    // unacknowledged rest in the spool for next time.
    if (!opts.once) {
        try {
            pass(scratch, false, /*closing=*/true);
        } catch (const std::exception& e) {
            note(Severity::kError, event::kPassFailed, std::string("the last pass failed: ") + e.what());
        }
    }
    if (!opts.once) service.stopping();
    sender_stop = true;
    for (auto& t : sender_threads)
        if (t.joinable()) t.join();
    for (auto& l : lanes_)
        if (auto st = l.spool.flush_ack(); !st.ok)
            note(Severity::kWarning, event::kAckPersistFailed,
                 "spool: " + st.error + " (records sent again at the next start)");
    metrics_server_.stop();
    return status;
}

void Pipeline::idle_wait(int timeout_ms) {
    // Sources that can say when they have something new wake the pass at once; the others
    // (and a missed wake) are read within the interval. Woken passes are 50 ms apart at least:
    // a job trickling bytes into its files costs the node 20 passes a second, not a spin.
    constexpr int kMinGapMs = 50;
    timeout_ms = std::max(timeout_ms, 0);
    std::vector<pollfd> fds;
    for (const auto& src : sources_)
        if (const int fd = src->wake_fd(); fd >= 0) fds.push_back({fd, POLLIN, 0});
    const int64_t started = monotonic_ns();
    if (fds.empty() || ::poll(fds.data(), fds.size(), timeout_ms) <= 0) {
        if (fds.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
        return;
    }
    for (const auto& src : sources_)
        if (src->wake_fd() >= 0) src->woken();
    const int64_t waited_ms = (monotonic_ns() - started) / 1'000'000;
    if (waited_ms < kMinGapMs) std::this_thread::sleep_for(std::chrono::milliseconds(kMinGapMs - waited_ms));
}

std::string Pipeline::render_metrics() const {
    return metrics_.render();
}

}  // namespace jobtrail::shipper
