#include "shipper/sender.hpp"

#include <algorithm>
#include <chrono>
#include <random>
#include <string_view>

#include "common/time.hpp"

namespace jobtrail::shipper {

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
