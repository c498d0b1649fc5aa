#include "shipper/sender.hpp"

#include <algorithm>
#include <chrono>
#include <random>
#include <string_view>

#include "common/time.hpp"

namespace jobtrail::shipper {
namespace {

uint64_t record_bytes(const spool::ReadBatch& b, const spool::RecordView& r) {
    // What Loki's rate limits count: the line and its structured metadata; and a byte an entry,
    // so that halving a cap after a 413 makes progress through blank lines too.
    if (r.run != spool::kNoRun) return b.run(r).line_bytes + b.run(r).metadata_bytes + b.run(r).count;
    uint64_t n = r.line.size() + 1;
    for (const auto& [k, v] : b.metadata(r)) n += k.size() + v.size();
    return n;
}

}  // namespace

Sender::Sender(const config::ShipperConfig& cfg, spool::Spool& spool, Metrics& m, Events events, Lane lane)
    : Sender(cfg, spool, m, std::move(events), nullptr, lane) {
    auto once = std::make_shared<std::once_flag>();
    make_ = [this, once]() -> std::unique_ptr<loki::PushTransport> {
        auto c = std::make_unique<loki::Client>(config::loki_endpoint(cfg_));
        if (auto st = c->load_secrets(); !st.ok)
            std::call_once(*once, [&] {
                events_.emit(Severity::kError, "sender", "credentials_unreadable",
                             st.error + " (pushing without those credentials)");
            });
        return c;
    };
}

Sender::Sender(const config::ShipperConfig& cfg, spool::Spool& spool, Metrics& m, Events events, TransportFactory make,
               Lane lane)
    : cfg_(cfg),
      spool_(spool),
      m_(m),
      events_(std::move(events)),
      make_(std::move(make)),
      lane_(lane),
      max_in_flight_(std::max<size_t>(1, cfg.max_in_flight)) {}

Sender::~Sender() {
    stop_workers();
}

void Sender::start_workers() {
    quit_ = false;
    for (size_t i = 0; i < max_in_flight_; ++i) workers_.emplace_back([this] { worker(); });
}

void Sender::stop_workers() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        quit_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : workers_) t.join();  // a request in flight ends within the client's timeout
    workers_.clear();
}

void Sender::worker() {
    const auto transport = make_();
    std::unique_lock<std::mutex> lk(mu_);
    while (true) {
        work_cv_.wait(lk, [&] { return quit_ || !todo_.empty(); });
        if (quit_) return;
        Job job = std::move(todo_.front());
        todo_.pop_front();
        lk.unlock();
        job.result = transport->push(std::string_view(job.body.data(), job.body_size));
        lk.lock();
        done_.push_back(std::move(job));
        done_cv_.notify_one();
    }
}

// Reads batches into the window; true if it read any.
bool Sender::fill_window() {
    bool any = false;
    // Beyond the front batch kWindowBytes; while a stream of the window waits (paced, backing
    // off) up to kWindowBatches, so that the other streams' lines behind its go on.
    const int64_t now = monotonic_ns();
    const bool waiting = std::any_of(streams_.begin(), streams_.end(), [&](const auto& kv) {
        return !kv.second.queue.empty() && kv.second.next_try_ns > now;
    });
    const auto room = [&] {
        if (window_.size() >= kWindowBatches) return false;
        if (window_.size() < 2 || waiting) return true;
        return window_bytes_ - window_.front().records.bytes() < kWindowBytes;
    };
    while (room()) {
        if (spare_.empty()) spare_.emplace_back();
        Batch& batch = spare_.front();
        batch.open_pieces = 0;
        if (spool_.read(batch.records, 100'000, cfg_.batch_max_bytes, batch.end) == 0) break;
        any = true;
        window_bytes_ += batch.records.bytes();
        window_.splice(window_.end(), spare_, spare_.begin());
        // Entries Loki would reject as too old forever are dropped, counted, instead of retried.
        const int64_t oldest = realtime_ns() - cfg_.max_age_ms * 1'000'000;
        // Group by stream in the spool's order; lines of one stream mostly come in runs. A
        // compressed run's too-old entries are dropped when it is sent.
        std::vector<std::pair<std::string_view, Piece>> order;
        std::string_view last_stream;
        size_t last = 0;
        for (const auto& r : batch.records.records()) {
            if (r.run == spool::kNoRun && r.ts_ns < oldest) {
                m_.drop("too_old");
                continue;
            }
            // A run's records share one view of its stream: same bytes, no compare needed.
            const bool same = last_stream.data() == r.stream.data() && last_stream.size() == r.stream.size();
            if (order.empty() || (!same && last_stream != r.stream)) {
                auto it = std::find_if(order.begin(), order.end(), [&](const auto& p) { return p.first == r.stream; });
                if (it == order.end()) {
                    order.push_back({r.stream, Piece{&batch, {}, 0}});
                    it = order.end() - 1;
                }
                last = static_cast<size_t>(it - order.begin());
            }
            last_stream = r.stream;  // this frame's view, so its next records need no compare
            order[last].second.recs.push_back(&r);
        }
        for (auto& [stream, piece] : order) {
            auto it = streams_.find(stream);
            if (it == streams_.end()) it = streams_.emplace(std::string(stream), StreamState{}).first;
            it->second.queue.push_back(std::move(piece));
            it->second.last_active_ns = monotonic_ns();
            ++batch.open_pieces;
        }
    }
    return any;
}

void Sender::dispatch(int64_t now) {
    for (auto& [name, s] : streams_) {
        if (in_flight_ >= max_in_flight_) return;
        if (s.in_flight || s.queue.empty() || s.next_try_ns > now) continue;
        if (s.learned_ns && now - s.learned_ns > reprobe_ns_) {
            // What Loki's answers taught is probed again: its limits change (and a restart's
            // answers are not its limits).
            s.rate_bps = 0;
            s.cap_bytes = 0;
            s.cap_grows = false;
            s.learned_ns = 0;
        }
        if (tenant_cap_ && now - tenant_learned_ns_ > reprobe_ns_) tenant_cap_ = tenant_rate_ = 0;
        uint64_t cap = cfg_.batch_max_bytes;
        // Pushes of a quarter of the stream's pace: Loki's rate store sees it steady, never a
        // burst above its shard threshold.
        if (cfg_.max_stream_rate) cap = std::min(cap, std::max<uint64_t>(1, cfg_.max_stream_rate / 4));
        if (s.cap_bytes) cap = std::min(cap, s.cap_bytes);
        if (tenant_cap_) cap = std::min(cap, tenant_cap_);
        Job job{name, {}, 0, {}};
        if (!spare_bodies_.empty()) {
            job.body = std::move(spare_bodies_.back());
            spare_bodies_.pop_back();
        }
        if (!build(name, s, cap, job)) {
            spare_bodies_.push_back(std::move(job.body));
            continue;
        }
        s.in_flight = true;
        ++in_flight_;
        {
            std::lock_guard<std::mutex> lk(mu_);
            todo_.push_back(std::move(job));
        }
        work_cv_.notify_one();
    }
}

bool Sender::build(const std::string& name, StreamState& s, uint64_t cap, Job& job) {
    const int64_t oldest = realtime_ns() - cfg_.max_age_ms * 1'000'000;
    // Sent as spooled: within the cap, nothing too old, and metadata only to a Loki that takes it.
    const auto as_is = [&](const spool::RunView& run) {
        return run.line_bytes + run.metadata_bytes + run.count <= cap && run.oldest_ts_ns >= oldest &&
               (!run.has_metadata || cfg_.structured_metadata);
    };
    while (!s.queue.empty()) {
        Piece& p = s.queue.front();
        const spool::ReadBatch& rb = p.batch->records;
        s.sent_n = s.sent_bytes = s.sent_line_bytes = 0;
        s.sent_items = 0;
        s.partial = false;
        const bool runs = p.recs[p.next]->run != spool::kNoRun;
        if (runs && (s.run_done > 0 || !as_is(rb.run(*p.recs[p.next])))) {
            if (build_partial(name, s, cap, oldest, job)) return true;
            continue;  // all of that run was dropped
        }
        size_t i = p.next;
        if (runs) {
            // Whole runs, their compressed bytes as they are.
            push_runs_.clear();
            uint64_t raw = 0;
            for (; i < p.recs.size() && p.recs[i]->run != spool::kNoRun; ++i) {
                const uint64_t b = record_bytes(rb, *p.recs[i]);
                const spool::RunView& run = rb.run(*p.recs[i]);
                if (i > p.next && (s.sent_bytes + b > cap || !as_is(run))) break;
                s.sent_bytes += b;
                s.sent_line_bytes += run.line_bytes;
                s.sent_n += run.count;
                raw += run.raw_size;
                push_runs_.push_back(run.elements());
            }
            loki::encode_push_runs(name, push_runs_, raw, job.body, &job.body_size);
        } else {
            push_streams_.resize(1);
            loki::StreamRef& ref = push_streams_[0];
            ref.labels = name;
            ref.entries.clear();
            for (; i < p.recs.size() && p.recs[i]->run == spool::kNoRun; ++i) {
                const spool::RecordView& r = *p.recs[i];
                const uint64_t b = record_bytes(rb, r);
                if (i > p.next && s.sent_bytes + b > cap) break;  // at least one entry per request
                s.sent_bytes += b;
                s.sent_line_bytes += r.line.size();
                ref.entries.push_back({r.ts_ns, r.line, nullptr, rb.metadata(r)});
            }
            s.sent_n = ref.entries.size();
            loki::encode_push(push_streams_, cfg_.structured_metadata, push_scratch_, job.body, &job.body_size);
        }
        s.sent_items = i - p.next;
        return true;
    }
    return false;
}

bool Sender::build_partial(const std::string& name, StreamState& s, uint64_t cap, int64_t oldest, Job& job) {
    Piece& p = s.queue.front();
    const spool::RunView& run = p.batch->records.run(*p.recs[p.next]);
    run_records_.clear();
    run_metadata_.clear();
    // Decompressed again for each request it makes (at most a run's 64 KiB): kept, it would be
    // one more buffer per stream waiting on Loki.
    const bool decoded = [&] {
        std::string why;
        if (spool::expand_run(run, run_raw_, run_records_, run_metadata_, &why)) return true;
        m_.drop("spool_corrupt", run.count - s.run_done);
        events_.emit(Severity::kError, "sender", "spool_corrupt",
                     "a spooled run of " + std::to_string(run.count) + " records of " + name + " does not decode (" +
                         why + "); dropped");
        return false;
    }();
    push_streams_.resize(1);
    loki::StreamRef& ref = push_streams_[0];
    ref.labels = name;
    ref.entries.clear();
    // Too-old entries are skipped (counted when the request is answered for, or now if nothing
    // else is left), not sent one request each.
    size_t i = s.run_done;
    uint64_t skipped = 0;
    for (; decoded && i < run.count; ++i) {
        const spool::RecordView& r = run_records_[i];
        if (r.ts_ns < oldest) {
            ++skipped;
            continue;
        }
        const auto md = std::span<const spool::MetadataView>(run_metadata_).subspan(r.metadata_begin, r.metadata_count);
        uint64_t b = r.line.size() + 1;  // at least a byte, so halving a 413's cap always makes progress
        for (const auto& [k, v] : md) b += k.size() + v.size();
        if (!ref.entries.empty() && s.sent_bytes + b > cap) break;
        s.sent_bytes += b;
        s.sent_line_bytes += r.line.size();
        ref.entries.push_back({r.ts_ns, r.line, nullptr, md});
    }
    s.sent_n = ref.entries.size();
    s.sent_consumed = static_cast<uint32_t>(i - s.run_done);
    s.sent_skipped = skipped;
    s.partial = true;
    if (!ref.entries.empty())
        loki::encode_push(push_streams_, cfg_.structured_metadata, push_scratch_, job.body, &job.body_size);
    // The views into them are done with: what one huge run grew is not kept.
    if (run_raw_.capacity() > 1 << 20) std::string().swap(run_raw_);
    if (run_records_.capacity() > 1 << 14) std::vector<spool::RecordView>().swap(run_records_);
    if (run_metadata_.capacity() > 1 << 14) std::vector<spool::MetadataView>().swap(run_metadata_);
    if (!ref.entries.empty()) return true;
    if (skipped) m_.drop("too_old", skipped);
    s.run_done = 0;
    advance(s, 1);
    return false;
}

void Sender::advance(StreamState& s, size_t items) {
    Piece& p = s.queue.front();
    p.next += items;
    if (p.next >= p.recs.size()) {
        --p.batch->open_pieces;
        s.queue.pop_front();
    }
}

// What is in flight for the stream is answered for.
void Sender::settle(StreamState& s) {
    s.attempt = 0;
    if (s.partial) {
        const Piece& p = s.queue.front();
        if (s.sent_skipped) m_.drop("too_old", s.sent_skipped);
        s.run_done += s.sent_consumed;
        if (s.run_done < p.batch->records.run(*p.recs[p.next]).count) return;
        s.run_done = 0;
        advance(s, 1);
        return;
    }
    advance(s, s.sent_items);
}

void Sender::backoff(StreamState& s, int64_t now) {
    static thread_local std::mt19937 rng{std::random_device{}()};
    int64_t d = cfg_.min_backoff_ms;
    for (int i = 0; i < s.attempt && d < cfg_.max_backoff_ms; ++i) d *= 2;
    d = std::min(d, cfg_.max_backoff_ms);
    d = d / 2 + static_cast<int64_t>(rng() % static_cast<uint32_t>(d / 2 + 1));  // jitter: [d/2, d]
    s.next_try_ns = std::max(s.next_try_ns, now + d * 1'000'000);
    ++s.attempt;
}

void Sender::handle(const Job& job) {
    auto& s = streams_.find(job.stream)->second;
    s.in_flight = false;
    --in_flight_;
    ++m_.pushes;
    const auto& res = job.result;
    const int64_t now = monotonic_ns();
    const auto v = loki::classify_push_response(res.status, res.body);
    const uint64_t line_bytes = s.sent_line_bytes;
    const auto paced = [&] {
        // The stream's bucket refills at the named rate (or our own pace, below Loki's shard
        // threshold): the next request waits for what this took. A wait Loki's answer asks for
        // is never longer than max_backoff (the answer may be wrong); our own pace is ours.
        int64_t wait = 0;
        if (s.rate_bps)
            wait =
                std::min<int64_t>(int64_t(s.sent_bytes * 1'000'000'000 / s.rate_bps), cfg_.max_backoff_ms * 1'000'000);
        if (cfg_.max_stream_rate) wait = std::max(wait, int64_t(s.sent_bytes * 1'000'000'000 / cfg_.max_stream_rate));
        if (wait) s.next_try_ns = std::max(s.next_try_ns, now + wait);
    };
    switch (v.verdict) {
        case loki::Verdict::kAccepted:
            m_.sent += s.sent_n;
            m_.sent_bytes += line_bytes;
            m_.last_success_ns = m_.lane_last_success_ns[lane_index(lane_)] = realtime_ns();
            s.single_refusals = 0;
            if (s.cap_grows) {
                // Halved for a 429 that named no limit: doubled back with each success.
                const uint64_t ceiling = s.rate_bps ? std::max<uint64_t>(1, s.rate_bps * 3 / 4) : cfg_.batch_max_bytes;
                s.cap_bytes = std::min(s.cap_bytes * 2, ceiling);
                if (s.cap_bytes >= ceiling) {
                    s.cap_grows = false;
                    if (!s.rate_bps) s.cap_bytes = 0;
                }
            }
            paced();
            settle(s);
            return;
        case loki::Verdict::kRejected: {
            // One stream per request: everything the body names is of these entries. Entries
            // that reached the ingester are its "out of M"; those fewer went unreported.
            uint64_t n = std::min<uint64_t>(v.rejected_count(), s.sent_n);
            std::map<std::string, uint64_t> by_reason = v.rejected;
            if (v.total_entries && v.total_entries < s.sent_n && n < s.sent_n) {
                const uint64_t unreported = std::min<uint64_t>(s.sent_n - v.total_entries, s.sent_n - n);
                by_reason["unreported"] += unreported;
                n += unreported;
            }
            {
                std::lock_guard<std::mutex> lk(m_.mu);
                for (const auto& [reason, count] : by_reason) m_.rejected[reason] += count;
            }
            // Bytes of the accepted part: exact where the body gives lengths, else the average.
            const uint64_t known_n = std::min(v.rejected_known_entries, n);
            const uint64_t known_b = std::min(v.rejected_known_bytes, line_bytes);
            const uint64_t rest_n = s.sent_n - known_n, rest_b = line_bytes - known_b;
            const uint64_t other_rejected = n - known_n;
            m_.sent += s.sent_n - n;
            m_.sent_bytes += rest_n ? rest_b - rest_b * other_rejected / rest_n : 0;
            m_.last_success_ns = m_.lane_last_success_ns[lane_index(lane_)] = realtime_ns();
            events_.emit(Severity::kWarning, "sender", "rejected",
                         "Loki rejected " + std::to_string(n) + " of " + std::to_string(s.sent_n) + " entries (HTTP " +
                             std::to_string(res.status) + "), not retried: " + v.first_message);
            paced();
            settle(s);
            return;
        }
        case loki::Verdict::kSplit:
            if (s.sent_n <= 1) {
                {
                    std::lock_guard<std::mutex> lk(m_.mu);
                    m_.rejected["request_too_large"] += 1;
                }
                events_.emit(Severity::kWarning, "sender", "entry_too_large",
                             "Loki refused a single entry as too large (HTTP 413); dropped");
                settle(s);
                return;
            }
            s.cap_bytes = std::max<uint64_t>(1, s.sent_bytes / 2);
            s.cap_grows = false;  // a size Loki refused stays refused
            s.learned_ns = now;
            return;
        case loki::Verdict::kAuthFailure:
        case loki::Verdict::kRetry:
            break;
    }
    ++m_.retries;
    if (res.status == 429) {
        rate_limited(s, job.stream, v, now);
        return;
    }
    say_push_failed(s, v, res);
    backoff(s, now);
}

// What a 429 says of Loki's limits is a hint to check, never the truth: a limit Loki names is
// taken only when it is plausible (after a restart Loki names its WAL replay's unlimited rate,
// "8EB"), a wait is never longer than max_backoff, and what was learned is probed again after
// kReprobeNs. A 429 that names no usable limit (a proxy's, another Loki's) halves the stream's
// requests, down to one entry, instead of repeating the same one.
void Sender::rate_limited(StreamState& s, const std::string& stream, const loki::PushResponse& v, int64_t now) {
    const auto plausible = [&](uint64_t limit) {
        return limit && limit <= kMaxPlausibleRate && (!tenant_rate_ || limit <= tenant_rate_);
    };
    const int64_t max_wait = cfg_.max_backoff_ms * 1'000'000;
    if (v.tenant_rate_limit && v.tenant_rate_limit <= kMaxPlausibleRate) {
        // The tenant's limit takes a push whole: pieces below its rate, then ordinary backoff.
        tenant_rate_ = v.tenant_rate_limit;
        tenant_learned_ns_ = now;
        m_.loki_tenant_rate_limit_bytes = v.tenant_rate_limit;
        if (s.sent_bytes > v.tenant_rate_limit / 2) {
            const uint64_t below = std::max<uint64_t>(1, v.tenant_rate_limit / 2);
            tenant_cap_ = tenant_cap_ ? std::min(tenant_cap_, below) : below;
        }
        if (tenant_said_ns_ == 0 || now - tenant_said_ns_ >= kSayEveryNs) {
            tenant_said_ns_ = now;
            events_.emit(Severity::kWarning, "sender", "tenant_rate_limited",
                         "Loki's ingestion rate limit for the tenant (" + std::to_string(v.tenant_rate_limit) +
                             " bytes/s) refused a push of " + std::to_string(s.sent_bytes) +
                             " bytes; sending smaller pushes, data stays in the spool: " + v.first_message);
        }
        backoff(s, now);
        return;
    }
    const bool per_stream = v.rejected.count("per_stream_rate_limit") != 0;
    if (per_stream && plausible(v.stream_rate_limit)) {
        // Per-stream rate: below it with room for the burst to refill, paced at it. Refused
        // again after a paced wait, the burst is smaller than our piece: halve.
        const bool repeat = s.rate_bps == v.stream_rate_limit && s.cap_bytes && s.sent_bytes <= s.cap_bytes;
        s.rate_bps = v.stream_rate_limit;
        s.learned_ns = now;
        m_.loki_stream_rate_limit_bytes = v.stream_rate_limit;
        const uint64_t below = std::max<uint64_t>(1, v.stream_rate_limit * 3 / 4);
        s.cap_bytes =
            repeat ? std::max<uint64_t>(1, s.sent_bytes / 2) : std::min(s.cap_bytes ? s.cap_bytes : below, below);
        s.cap_grows = false;
        if (s.sent_n == 1 && ++s.single_refusals >= 3) {
            // One entry the stream's limit never lets in: counted, not retried forever.
            {
                std::lock_guard<std::mutex> lk(m_.mu);
                m_.rejected["per_stream_rate_limit"] += 1;
            }
            events_.emit(Severity::kWarning, "sender", "entry_over_stream_limit",
                         "Loki's per-stream rate limit refused one entry of " + std::to_string(s.sent_bytes - 1) +
                             " bytes three times; dropped: " + v.first_message);
            s.single_refusals = 0;
            settle(s);
            return;
        }
        say_rate_limited(s, now,
                         "Loki's per-stream rate limit (" + std::to_string(v.stream_rate_limit) +
                             " bytes/s) holds back " + stream + "; pacing it at that rate");
        s.next_try_ns =
            now + std::clamp<int64_t>(int64_t(s.sent_bytes * 1'000'000'000 / s.rate_bps),
                                      cfg_.min_backoff_ms * 1'000'000, std::max<int64_t>(max_wait, 1'000'000));
        return;
    }
    // No limit we can use: halve what the stream sends, down to one entry, and back off. A lone
    // entry is never dropped for it: a limit nobody named may be gone at the next try.
    s.cap_bytes = std::max<uint64_t>(1, s.sent_bytes / 2);
    s.cap_grows = true;
    s.learned_ns = now;
    const std::string named = per_stream && v.stream_rate_limit
                                  ? "a per-stream limit of " + std::to_string(v.stream_rate_limit) +
                                        " bytes/s, which cannot be the limit (Loki restarted?)"
                              : per_stream ? "its per-stream limit in a form we cannot read"
                                           : "no limit we can read";
    say_rate_limited(s, now,
                     "Loki answered 429 for " + stream + " naming " + named + "; sending " +
                         std::to_string(s.cap_bytes) + " bytes at most and retrying: " + v.first_message);
    backoff(s, now);
}

void Sender::say_rate_limited(StreamState& s, int64_t now, const std::string& text) {
    if (s.said_ns != 0 && now - s.said_ns < kSayEveryNs) return;
    s.said_ns = now;
    events_.emit(Severity::kWarning, "sender", "stream_rate_limited", text + " (data stays in the spool)");
}

void Sender::say_push_failed(const StreamState& s, const loki::PushResponse& v, const loki::HttpResult& res) {
    if (s.attempt != 0 && s.attempt % 10 != 0) return;
    const bool auth = v.verdict == loki::Verdict::kAuthFailure;
    // Loki without a tenant says "no org id": name the setting that fixes it.
    const bool no_tenant = res.status == 401 && v.first_message.find("no org id") != std::string::npos;
    events_.emit(auth ? Severity::kError : Severity::kWarning, "sender", auth ? "auth_failed" : "push_failed",
                 std::string(no_tenant ? "Loki wants a tenant: set shipper.loki.tenant (sent as X-Scope-OrgID)"
                             : auth    ? "Loki refused our credentials"
                                       : "Loki push failed") +
                     " (" + (res.status ? "HTTP " + std::to_string(res.status) + ": " + v.first_message : res.error) +
                     "); retrying, data stays in the spool");
}

// Acknowledges the spool up to the end of the last batch before which all is answered for.
void Sender::ack_done() {
    spool::Position end;
    bool any = false;
    while (!window_.empty() && window_.front().open_pieces == 0) {
        end = window_.front().end;
        window_bytes_ -= window_.front().records.bytes();
        any = true;
        // Kept for the next read, within the window's bound.
        if (spare_.empty())
            spare_.splice(spare_.end(), window_, window_.begin());
        else
            window_.pop_front();
    }
    if (any)
        if (auto st = spool_.ack(end); !st.ok)
            // Not fatal: Loki has the records; after a restart they are sent again and dropped
            // by Loki as duplicates.
            events_.emit(Severity::kWarning, "sender", "ack_failed", "spool: " + st.error);
    m_.oldest_pending_ns[lane_index(lane_)] =
        window_.empty() || window_.front().records.empty() ? 0 : window_.front().records.records().front().ts_ns;
}

// The map stays the size of what is pending, plus the streams whose learned rate is recent: a
// node sees a new NCCL stream per job, for months.
void Sender::forget_idle(int64_t now) {
    for (auto it = streams_.begin(); it != streams_.end();) {
        const StreamState& s = it->second;
        const bool idle = !s.in_flight && s.queue.empty() && s.next_try_ns <= now;
        if (idle && (!s.rate_bps || now - s.last_active_ns > kForgetIdleNs))
            it = streams_.erase(it);
        else
            ++it;
    }
}

void Sender::run(const std::atomic<bool>& stop) {
    start_workers();
    while (!stop) {
        const bool read = fill_window();
        forget_idle(monotonic_ns());
        ack_done();  // batches that were all too old
        busy_ = !window_.empty();
        if (window_.empty() && !read) {
            // Drained: what Loki acknowledged goes to disk now, not at the next ack (which on a
            // quiet node may come hours later, when Loki no longer drops a re-sent line).
            if (auto st = spool_.flush_ack(); !st.ok)
                events_.emit(Severity::kWarning, "sender", "ack_failed", "spool: " + st.error);
            if (spool_.wait_readable(0, stop)) {
                // Readable, yet nothing was read (a segment it cannot open): retry after
                // max_wait, not in a spin.
                for (int64_t t = 0; t < cfg_.batch_wait_ms && !stop; t += 50)
                    std::this_thread::sleep_for(std::chrono::milliseconds(50));
            } else {
                // Woken by the records' commit itself: a line on a quiet node goes out at once.
                spool_.wait_readable(cfg_.batch_wait_ms, stop);
            }
            continue;
        }
        dispatch(monotonic_ns());
        std::deque<Job> done;
        {
            std::unique_lock<std::mutex> lk(mu_);
            done_cv_.wait_for(lk, std::chrono::milliseconds(50), [&] { return !done_.empty() || stop; });
            done.swap(done_);
        }
        for (auto& job : done) {
            handle(job);
            if (spare_bodies_.size() < max_in_flight_) spare_bodies_.push_back(std::move(job.body));
        }
        ack_done();
    }
    stop_workers();
    // Whatever was not answered for stays in the spool; read it again from the acknowledged point.
    todo_.clear();
    done_.clear();
    window_.clear();
    window_bytes_ = 0;
    streams_.clear();
    in_flight_ = 0;
    spool_.rewind();
    busy_ = false;
}

}  // namespace jobtrail::shipper
