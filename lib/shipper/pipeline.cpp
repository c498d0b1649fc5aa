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
#include "shipper/metrics_server.hpp"
#include "shipper/sources/file_source.hpp"
#include "shipper/sources/journald_source.hpp"
#include "shipper/sources/kmsg_source.hpp"
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

Pipeline::Pipeline(const config::Config& cfg) : cfg_(cfg) {
    node_.cluster = cfg.cluster.empty() ? "default" : cfg.cluster;
    node_.node = cfg.node.empty() ? hostname() : cfg.node;
}

Pipeline::~Pipeline() = default;

void Pipeline::log(const std::string& msg) const {
    std::fprintf(stderr, "jobtrail-shipper: %s\n", msg.c_str());
    // Warnings and errors also go to Loki, beside the logs they concern.
    if (self_ && (msg.rfind("warning", 0) == 0 || msg.rfind("error", 0) == 0)) self_->note(msg);
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
            log("warning: spool is full (" + std::to_string(used) + " bytes); sources paused until Loki takes more");
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
        log("error: spool: " + spool_.error() + "; positions not advanced");
        return false;
    }
    // One durable file holds every source's position and the spool end they correspond to; the
    // sender may read up to that end only. A crash anywhere leaves them consistent.
    const spool::Position end = spool_.durable_end();
    nlohmann::json sources = nlohmann::json::object();
    for (const auto& src : sources_) sources[src->name()] = src->checkpoint();
    const nlohmann::json cp = {{"spool", {{"segment", end.segment}, {"offset", end.offset}}}, {"sources", sources}};
    if (auto st = write_file_atomic(checkpoint_path_, cp.dump() + "\n", 0644, /*durable=*/cfg_.shipper.spool_fsync);
        !st.ok) {
        log("error: checkpoint: " + st.error);
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
        log("error: " + st.error);
        return 1;
    }
    if (!clock_.load(state, err)) log("warning: boot clock: " + err);
    if (sc.kmsg) sources_.push_back(std::make_unique<KmsgSource>(cfg_.collector.kmsg_path, clock_, node_, metrics_));
    for (const auto& f : sc.files)
        sources_.push_back(std::make_unique<FileSource>(f, node_, sc.max_line_bytes, metrics_, 2000,
                                                        [this](const std::string& m) { log(m); }));
    auto self = std::make_unique<SelfSource>(node_, metrics_, sc.heartbeat_ms);
    self_ = self.get();
    sources_.push_back(std::move(self));
    if (sc.journald.enabled) {
        if (JournaldSource::available())
            sources_.push_back(std::make_unique<JournaldSource>(sc.journald, node_, sc.max_line_bytes, metrics_));
        else
            log("warning: shipper.sources.journald is enabled but this build has no libsystemd: not read");
    }
    checkpoint_path_ = state + "/shipper-checkpoint.json";
    pass_bytes_ = std::clamp<uint64_t>(sc.spool_max_bytes / (8 * (sources_.size() + 1)), 16 << 10, kPassBytes);
    nlohmann::json cp;
    if (auto text = read_small_file(checkpoint_path_, 256 << 20)) cp = nlohmann::json::parse(*text, nullptr, false);
    if (cp.is_object() && cp.contains("sources") && cp["sources"].is_object())
        for (auto& src : sources_)
            if (cp["sources"].contains(src->name())) src->restore(cp["sources"][src->name()]);
    stages_ = std::make_unique<Stages>(sc, cfg_.collector.layout(), metrics_);

    if (opts.dry_run) {
        // Read what is there, print it, remember nothing.
        std::vector<Event> events;
        for (auto& src : sources_) {
            events.clear();
            while (src->poll(events, pass_bytes_)) {
            }
            src->flush_partial(events);
            stages_->apply(events);
            for (const auto& e : events) {
                if (e.dropped) continue;
                std::printf("%s %s %s", format_rfc3339_ns(e.ts_ns).c_str(), e.origin->stream.c_str(), e.line.c_str());
                for (const auto* md : {&e.origin->metadata, &e.metadata})
                    for (const auto& [k, v] : *md) std::printf(" |%s=%s", k.c_str(), v.c_str());
                std::printf("\n");
            }
        }
        return 0;
    }

    spool::Spool::Recovery rec;
    if (!spool_.open({sc.spool_dir.empty() ? state + "/spool" : sc.spool_dir, 16ULL << 20, sc.spool_max_bytes, true,
                      sc.spool_fsync},
                     err, &rec)) {
        log("error: spool: " + err);
        return 1;
    }
    if (!rec.note.empty()) log("spool recovery: " + rec.note);
    // Records after the last checkpoint were spooled but their sources' positions were not
    // saved: the sources will read them again, so they go (they were never sent).
    // (A damaged checkpoint counts as none: a field of the wrong type must not stop the shipper.)
    auto number = [](const nlohmann::json& o, const char* k) {
        return o.contains(k) && o[k].is_number_unsigned() ? o[k].get<uint64_t>() : uint64_t{0};
    };
    if (cp.is_object() && cp.contains("spool") && cp["spool"].is_object() && number(cp["spool"], "segment") > 0) {
        const auto& sp = cp["spool"];
        if (!spool_.discard_after({number(sp, "segment"), number(sp, "offset")}, err)) {
            log("error: spool: " + err);
            return 1;
        }
    } else {
        // No checkpoint: every source starts from scratch; anything spooled before is unaccounted.
        spool_.discard_after(spool_.acked(), err);
    }

    MetricsServer metrics_server;
    if (!opts.once && !sc.metrics_listen.empty() &&
        !metrics_server.start(
            sc.metrics_listen, [this] { return render_metrics(); }, err))
        log("warning: metrics: " + err);

    std::atomic<bool> sender_stop{false};
    std::unique_ptr<Sender> sender;
    std::thread sender_thread;
    if (!sc.loki_url.empty()) {
        sender = std::make_unique<Sender>(sc, spool_, metrics_, [this](const std::string& m) { log(m); });
        sender_thread = std::thread([&] { sender->run(sender_stop); });
    } else {
        log("no shipper.loki.url configured: spooling only (logs stay on this node)");
    }

    const int64_t deadline = monotonic_ns() + opts.once_timeout_ms * 1'000'000;
    int status = 0;
    std::vector<Event> scratch;
    bool drained_pass = false;
    while (!stop) {
        const bool more = pass(scratch, opts.once && drained_pass);
        if (opts.once) {
            if (!more && drained_pass && carry_.empty() && (spool_.pending_bytes() == 0 || sc.loki_url.empty()) &&
                !(sender && sender->busy()))
                break;
            drained_pass = !more;
            if (monotonic_ns() > deadline) {
                log("error: --once: " + std::to_string(spool_.pending_bytes()) +
                    " bytes not acknowledged by Loki within the timeout; they stay in the spool");
                status = 2;
                break;
            }
        }
        if (!more || spool_full_logged_) std::this_thread::sleep_for(std::chrono::milliseconds(opts.once ? 50 : 250));
    }
    // SIGTERM: what was read is durable (pass() synced it); the sender stops within one request
    // timeout, leaving the unacknowledged rest in the spool for next time.
    sender_stop = true;
    if (sender_thread.joinable()) sender_thread.join();
    metrics_server.stop();
    return status;
}

std::string Pipeline::render_metrics() const {
    std::string s;
    auto counter = [&](const char* name, const char* help, uint64_t v) {
        s += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " " +
             std::to_string(v) + "\n";
    };
    counter("jobtrail_shipper_records_read_total", "Records read from all sources (before the stages drop any).",
            metrics_.read);
    counter("jobtrail_shipper_records_spooled_total", "Records made durable in the spool.", metrics_.spooled);
    counter("jobtrail_shipper_records_sent_total", "Records Loki acknowledged.", metrics_.sent);
    counter("jobtrail_shipper_bytes_sent_total", "Line bytes Loki acknowledged.", metrics_.sent_bytes);
    counter("jobtrail_shipper_push_requests_total", "Push requests made.", metrics_.pushes);
    counter("jobtrail_shipper_retries_total", "Pushes retried (429, 5xx, transport errors).", metrics_.retries);
    counter("jobtrail_shipper_spool_full_total", "Passes where sources paused on a full spool.", metrics_.spool_full);
    counter("jobtrail_shipper_kmsg_lost_total", "Kernel records overwritten before they were read.",
            metrics_.kmsg_lost);
    s += "# HELP jobtrail_shipper_spool_bytes Unacknowledged bytes in the spool.\n# TYPE jobtrail_shipper_spool_bytes "
         "gauge\njobtrail_shipper_spool_bytes " +
         std::to_string(spool_.pending_bytes()) + "\n";
    s += "# HELP jobtrail_shipper_last_success_timestamp_seconds Last acknowledged push.\n# TYPE "
         "jobtrail_shipper_last_success_timestamp_seconds gauge\njobtrail_shipper_last_success_timestamp_seconds " +
         std::to_string(metrics_.last_success_ns / 1'000'000'000) + "\n";
    s += "# HELP jobtrail_shipper_loki_limit_bytes_per_second Rate limits Loki named in a 429 (0: none seen); pushes "
         "are sized and paced below them.\n# TYPE jobtrail_shipper_loki_limit_bytes_per_second gauge\n"
         "jobtrail_shipper_loki_limit_bytes_per_second{limit=\"tenant\"} " +
         std::to_string(metrics_.loki_tenant_rate_limit_bytes) +
         "\njobtrail_shipper_loki_limit_bytes_per_second{limit=\"per_stream\"} " +
         std::to_string(metrics_.loki_stream_rate_limit_bytes) + "\n";
    const int64_t oldest = metrics_.oldest_pending_ns;
    s += "# HELP jobtrail_shipper_spool_oldest_age_seconds Age of the oldest record Loki has not acknowledged (0: "
         "none).\n# TYPE jobtrail_shipper_spool_oldest_age_seconds gauge\njobtrail_shipper_spool_oldest_age_seconds " +
         std::to_string(oldest && spool_.pending_bytes() ? std::max<int64_t>(0, realtime_ns() - oldest) / 1'000'000'000
                                                         : 0) +
         "\n";
    std::lock_guard<std::mutex> lk(metrics_.mu);
    s += "# HELP jobtrail_shipper_source_backlog_bytes Bytes written to a source and not read yet.\n# TYPE "
         "jobtrail_shipper_source_backlog_bytes gauge\n";
    for (const auto& [src, b] : metrics_.source_backlog_bytes)
        s += "jobtrail_shipper_source_backlog_bytes{source=\"" + src + "\"} " + std::to_string(b) + "\n";
    s += "# HELP jobtrail_shipper_source_last_read_timestamp_seconds Timestamp of the newest record read, per "
         "source.\n# TYPE jobtrail_shipper_source_last_read_timestamp_seconds gauge\n";
    for (const auto& [src, ts] : metrics_.source_last_read_ns)
        s += "jobtrail_shipper_source_last_read_timestamp_seconds{source=\"" + src + "\"} " +
             std::to_string(ts / 1'000'000'000) + "\n";
    s += "# HELP jobtrail_shipper_dropped_total Records dropped, by reason.\n# TYPE jobtrail_shipper_dropped_total "
         "counter\n";
    for (const auto& [r, n] : metrics_.dropped)
        s += "jobtrail_shipper_dropped_total{reason=\"" + r + "\"} " + std::to_string(n) + "\n";
    s += "# HELP jobtrail_shipper_rejected_total Entries Loki rejected, by reason.\n# TYPE "
         "jobtrail_shipper_rejected_total "
         "counter\n";
    for (const auto& [r, n] : metrics_.rejected)
        s += "jobtrail_shipper_rejected_total{reason=\"" + r + "\"} " + std::to_string(n) + "\n";
    s += "# HELP jobtrail_shipper_files_refused_total Files matching a source's paths that were not read (a "
         "symlink, FIFO, device, hard link or another owner's file), by reason.\n# TYPE "
         "jobtrail_shipper_files_refused_total counter\n";
    for (const auto& [r, n] : metrics_.files_refused)
        s += "jobtrail_shipper_files_refused_total{reason=\"" + r + "\"} " + std::to_string(n) + "\n";
    return s;
}

}  // namespace jobtrail::shipper
