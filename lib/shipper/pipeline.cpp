#include "shipper/pipeline.hpp"

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
#include "shipper/metrics_server.hpp"
#include "shipper/recovery.hpp"
#include "shipper/service_notify.hpp"
#include "shipper/sources/registry.hpp"
#include "shipper/sources/self_source.hpp"

namespace jobtrail::shipper {
namespace {

constexpr size_t kPassBytes = 1 << 20;  // per source per pass: bounds memory and the spool check

std::string hostname() {
    char h[256] = {};
    ::gethostname(h, sizeof h - 1);
    std::string s(h);
    return s.substr(0, s.find('.'));
}

}  // namespace

Pipeline::Pipeline(const config::Config& cfg, SourceFactory sources)
    : cfg_(cfg), make_sources_(std::move(sources)), events_([this](const InternalEvent& e) { on_event(e); }) {
    node_.cluster = cfg.cluster.empty() ? "default" : cfg.cluster;
    node_.node = cfg.node.empty() ? hostname() : cfg.node;
}

Pipeline::~Pipeline() = default;

void Pipeline::on_event(const InternalEvent& e) {
    {
        std::lock_guard<std::mutex> lk(metrics_.mu);
        ++metrics_.events[{e.component, e.name}];
    }
    const std::string text = (e.severity == Severity::kInfo ? "" : std::string(severity_name(e.severity)) + ": ") +
                             (e.component == "pipeline" ? "" : e.component + ": ") + e.message;
    std::fprintf(stderr, "jobtrail-shipper: %s\n", text.c_str());
    // Warnings and errors also go to Loki, beside the logs they concern.
    if (self_ && e.severity != Severity::kInfo) self_->note(text);
}

void Pipeline::note(Severity s, const std::string& name, const std::string& msg) const {
    events_.emit(s, "pipeline", name, msg);
}

bool Pipeline::can_defer_commit() const {
    return spool_.used_bytes_now() - std::min(spool_.used_bytes_now(), spool_.pending_bytes()) < 4 * pass_bytes_;
}

bool Pipeline::pass(std::vector<Event>& events, bool final_flush) {
    bool more = false;
    // Records a full spool refused last time go first; sources wait until they are in.
    while (!carry_.empty()) {
        if (spool_.append(carry_.front()) != spool::Spool::Append::kOk) return true;
        carry_.erase(carry_.begin());
        ++uncommitted_;
        checkpoint_dirty_ = true;
    }
    const uint64_t used = spool_.used_bytes_now();
    const uint64_t room = cfg_.shipper.spool_max_bytes - std::min(cfg_.shipper.spool_max_bytes, used);
    // A pass can add up to ~3x its line budget to the spool (labels, metadata, framing).
    if (room < (sources_.size() + 1) * pass_bytes_ * 3) {
        // Sources pause; kmsg keeps its position (the ring overrunning is reported as loss).
        if (!spool_full_logged_)
            note(Severity::kWarning, "spool_full",
                 "spool is full (" + std::to_string(used) + " bytes); sources paused until Loki takes more");
        spool_full_logged_ = true;
        ++metrics_.spool_full;
        return true;  // not drained: there is more to read once the spool has room
    }
    spool_full_logged_ = false;
    size_t appended = 0;
    for (auto& src : sources_) {
        events.clear();
        more |= src->poll(events, pass_bytes_);
        if (final_flush) src->flush_partial(events);
        metrics_.read += events.size();
        {
            // One lock and one map write per source and pass, not per line.
            int64_t newest = 0;
            for (const auto& e : events) newest = std::max(newest, e.ts_ns);
            std::lock_guard<std::mutex> lk(metrics_.mu);
            if (const int64_t b = src->backlog_bytes(); b >= 0) metrics_.source_backlog_bytes[src->name()] = b;
            if (newest) {
                int64_t& last = metrics_.source_last_read_ns[src->name()];
                last = std::max(last, newest);
            }
        }
        stages_->apply(events);
        for (auto& e : events) {
            if (e.dropped) continue;
            const spool::RecordRef r{e.ts_ns, e.origin->stream, e.line, &e.origin->metadata, &e.metadata};
            // The room check above leaves space for a whole pass; should a pass still not fit,
            // keep its records in memory (bounded by one pass) rather than lose what was read.
            if (spool_.append(r) != spool::Spool::Append::kOk) {
                spool::Record c{e.ts_ns, e.origin->stream, std::move(e.line), e.origin->metadata};
                c.metadata.insert(c.metadata.end(), e.metadata.begin(), e.metadata.end());
                carry_.push_back(std::move(c));
                continue;
            }
            ++appended;
        }
    }
    if (appended == 0 && !checkpoint_dirty_) return more;
    uncommitted_ += appended;
    // Group commit: one fdatasync + checkpoint per ~200 ms of busy reading, at once when idle
    // or when a few passes are waiting.
    if (more && !final_flush && carry_.empty() && can_defer_commit() && monotonic_ns() - last_commit_ns_ < 200'000'000)
        return more;
    appended = uncommitted_;
    if (!spool_.sync()) {
        note(Severity::kError, "spool_sync_failed", "spool: " + spool_.error() + "; positions not advanced");
        return false;
    }
    // One durable file holds every source's position and the spool end they correspond to; the
    // sender may read up to that end only. A crash anywhere leaves them consistent.
    const spool::Position end = spool_.durable_end();
    if (auto st = write_file_atomic(checkpoint_path_, checkpoint_text(end, sources_), 0644,
                                    /*durable=*/cfg_.shipper.spool_fsync);
        !st.ok) {
        note(Severity::kError, "checkpoint_failed", "checkpoint: " + st.error);
        return false;
    }
    checkpoint_dirty_ = false;
    uncommitted_ = 0;
    last_commit_ns_ = monotonic_ns();
    spool_.set_readable_end(end);
    metrics_.spooled += appended;
    return more;
}

int Pipeline::run(const RunOptions& opts, const std::atomic<bool>& stop) {
    const auto& sc = cfg_.shipper;
    const std::string state = cfg_.collector.state_dir;
    std::string err;
    if (auto st = make_dirs(state, 0755); !st.ok) {
        note(Severity::kError, "state_dir", st.error);
        return 1;
    }
    if (!clock_.load(state, err)) note(Severity::kWarning, "boot_clock", "boot clock: " + err);
    const SourceContext ctx{cfg_, node_, metrics_, events_, clock_};
    sources_ = make_sources_ ? make_sources_(ctx) : build_sources(ctx);
    auto self = std::make_unique<SelfSource>(node_, metrics_, sc.heartbeat_ms);
    self_ = self.get();
    sources_.push_back(std::move(self));
    checkpoint_path_ = state + "/shipper-checkpoint.json";
    pass_bytes_ = std::clamp<uint64_t>(sc.spool_max_bytes / (8 * (sources_.size() + 1)), 16 << 10, kPassBytes);
    const Checkpoint cp = read_checkpoint(checkpoint_path_);
    restore_sources(cp, sources_);
    stages_ = std::make_unique<Stages>(sc, cfg_.collector.layout(), metrics_);

    if (opts.dry_run) {
        print_dry_run(sources_, *stages_, pass_bytes_, stdout);
        return 0;
    }

    spool::Spool::Recovery rec;
    if (!spool_.open({sc.spool_dir.empty() ? state + "/spool" : sc.spool_dir, 16ULL << 20, sc.spool_max_bytes, true,
                      sc.spool_fsync},
                     err, &rec)) {
        note(Severity::kError, "spool_open_failed", "spool: " + err);
        return 1;
    }
    if (!rec.note.empty()) note(Severity::kInfo, "spool_recovered", "spool recovery: " + rec.note);
    if (!recover_spool(spool_, cp, err)) {
        note(Severity::kError, "spool_recovery_failed", "spool: " + err);
        return 1;
    }
    return main_loop(opts, stop);
}

int Pipeline::main_loop(const RunOptions& opts, const std::atomic<bool>& stop) {
    const auto& sc = cfg_.shipper;
    std::string err;
    MetricsServer metrics_server;
    if (!opts.once && !sc.metrics_listen.empty() &&
        !metrics_server.start(
            sc.metrics_listen, [this] { return render_metrics(); }, err))
        note(Severity::kWarning, "metrics_listen_failed", "metrics: " + err);

    std::atomic<bool> sender_stop{false};
    std::unique_ptr<Sender> sender;
    // Joined on every way out of this function, exceptions included: a joinable std::thread
    // destroyed while unwinding would abort the process.
    std::jthread sender_thread;
    if (!sc.loki_url.empty()) {
        sender = std::make_unique<Sender>(sc, spool_, metrics_, events_);
        sender_thread = std::jthread([&] { sender->run(sender_stop); });
    } else {
        note(Severity::kInfo, "no_loki", "no shipper.loki.url configured: spooling only (logs stay on this node)");
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
        bool more = false;
        try {
            more = pass(scratch, opts.once && drained_pass);
            service.progress(monotonic_ns());
        } catch (const std::exception& e) {
            // Nothing a source reads may end the shipper: the pass is tried again, and the
            // kernel and the other sources keep shipping.
            note(Severity::kError, "pass_failed", std::string("a pass failed and is retried: ") + e.what());
            std::this_thread::sleep_for(std::chrono::seconds(1));
        }
        if (opts.once) {
            if (!more && drained_pass && carry_.empty() && (spool_.pending_bytes() == 0 || sc.loki_url.empty()) &&
                !(sender && sender->busy()))
                break;
            drained_pass = !more;
            if (monotonic_ns() > deadline) {
                note(Severity::kError, "once_timeout",
                     "--once: " + std::to_string(spool_.pending_bytes()) +
                         " bytes not acknowledged by Loki within the timeout; they stay in the spool");
                status = 2;
                break;
            }
        }
        if (!more || spool_full_logged_) std::this_thread::sleep_for(std::chrono::milliseconds(opts.once ? 50 : 250));
    }
    // SIGTERM: what was read is durable (pass() synced it); the sender stops within one request
    // timeout, leaving the unacknowledged rest in the spool for next time.
    if (!opts.once) service.stopping();
    sender_stop = true;
    if (sender_thread.joinable()) sender_thread.join();
    metrics_server.stop();
    return status;
}

std::string Pipeline::render_metrics() const {
    return shipper::render_metrics(metrics_, spool_.pending_bytes());
}

}  // namespace jobtrail::shipper
