#include "shipper/sender.hpp"

#include <chrono>
#include <random>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "common/time.hpp"
#include "loki/response.hpp"

namespace jobtrail::shipper {

Sender::Sender(const config::ShipperConfig& cfg, spool::Spool& spool, Metrics& m, Events events)
    : cfg_(cfg), spool_(spool), m_(m), events_(std::move(events)), client_(config::loki_endpoint(cfg)) {
    std::string err;
    if (!client_.load_secrets(err))
        events_.emit(Severity::kError, "sender", "credentials_unreadable",
                     err + " (pushing without those credentials)");
}

void Sender::sleep_backoff(int attempt, const std::atomic<bool>& stop) {
    static thread_local std::mt19937 rng{std::random_device{}()};
    int64_t d = cfg_.min_backoff_ms;
    for (int i = 0; i < attempt && d < cfg_.max_backoff_ms; ++i) d *= 2;
    d = std::min(d, cfg_.max_backoff_ms);
    d = d / 2 + static_cast<int64_t>(rng() % static_cast<uint32_t>(d / 2 + 1));  // jitter: [d/2, d]
    for (int64_t slept = 0; slept < d && !stop; slept += 50)
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(50, d - slept)));
}

bool Sender::deliver(const std::vector<const spool::Record*>& recs, size_t from, size_t to,
                     const std::atomic<bool>& stop) {
    // Group by stream, keeping each stream's order (the spool's order). Lines of one stream
    // mostly come in runs, so the previous record's stream is tried before the map.
    std::vector<loki::StreamRef> streams;
    std::unordered_map<std::string_view, size_t> index;
    size_t bytes = 0, last = 0;
    for (size_t i = from; i < to; ++i) {
        const auto& r = *recs[i];
        if (streams.empty() || streams[last].labels != r.stream) {
            auto [it, fresh] = index.emplace(r.stream, streams.size());
            if (fresh) streams.push_back({r.stream, {}});
            last = it->second;
        }
        bytes += r.line.size();
        streams[last].entries.push_back({r.ts_ns, r.line, &r.metadata});
    }
    const std::string body = loki::encode_push(streams, cfg_.structured_metadata);
    for (int attempt = 0;; ++attempt) {
        if (stop) return false;
        const auto res = client_.push(body);
        ++m_.pushes;
        const auto verdict = loki::classify_push_response(res.status, res.body);
        switch (verdict.verdict) {
            case loki::Verdict::kAccepted:
                m_.sent += to - from;
                m_.sent_bytes += bytes;
                m_.last_success_ns = realtime_ns();
                return true;
            case loki::Verdict::kRejected: {
                uint64_t n = 0;
                {
                    std::lock_guard<std::mutex> lk(m_.mu);
                    for (const auto& [reason, count] : verdict.rejected) {
                        m_.rejected[reason] += count;
                        n += count;
                    }
                }
                m_.sent += (to - from) - std::min<uint64_t>(n, to - from);
                m_.last_success_ns = realtime_ns();
                events_.emit(Severity::kWarning, "sender", "rejected",
                             "Loki rejected " + std::to_string(n) + " of " + std::to_string(to - from) +
                                 " entries (HTTP " + std::to_string(res.status) +
                                 "), not retried: " + verdict.first_message);
                return true;
            }
            case loki::Verdict::kSplit:
                if (to - from <= 1) {
                    {
                        std::lock_guard<std::mutex> lk(m_.mu);
                        m_.rejected["request_too_large"] += 1;
                    }
                    events_.emit(Severity::kWarning, "sender", "entry_too_large",
                                 "Loki refused a single entry as too large (HTTP 413); dropped");
                    return true;
                }
                return deliver(recs, from, from + (to - from) / 2, stop) &&
                       deliver(recs, from + (to - from) / 2, to, stop);
            case loki::Verdict::kAuthFailure:
            case loki::Verdict::kRetry:
                ++m_.retries;
                if (attempt == 0 || attempt % 10 == 0) {
                    const bool auth = verdict.verdict == loki::Verdict::kAuthFailure;
                    events_.emit(auth ? Severity::kError : Severity::kWarning, "sender",
                                 auth ? "auth_failed" : "push_failed",
                                 std::string(auth ? "Loki refused our credentials" : "Loki push failed") + " (" +
                                     (res.status ? "HTTP " + std::to_string(res.status) + ": " + verdict.first_message
                                                 : res.error) +
                                     "); retrying, data stays in the spool");
                }
                sleep_backoff(attempt, stop);
                break;
        }
    }
}

bool Sender::send_batch(const std::atomic<bool>& stop) {
    spool::Position end;
    if (spool_.read(batch_, 100'000, cfg_.batch_max_bytes, end) == 0) {
        m_.oldest_pending_ns = 0;
        return false;
    }
    busy_ = true;
    // Batches start at the acknowledged position: the first record is the oldest waiting.
    m_.oldest_pending_ns = batch_.front().ts_ns;
    // Entries Loki would reject as too old forever are dropped, counted, instead of retried.
    const int64_t oldest = realtime_ns() - cfg_.max_age_ms * 1'000'000;
    std::vector<const spool::Record*> keep;
    keep.reserve(batch_.size());
    for (const auto& r : batch_) {
        if (r.ts_ns < oldest)
            m_.drop("too_old");
        else
            keep.push_back(&r);
    }
    const bool ok = keep.empty() || deliver(keep, 0, keep.size(), stop);
    if (ok)
        spool_.ack(end);
    else
        spool_.rewind();
    busy_ = false;
    return ok;
}

void Sender::run(const std::atomic<bool>& stop) {
    while (!stop) {
        if (!send_batch(stop)) {
            for (int64_t t = 0; t < cfg_.batch_wait_ms && !stop; t += 50)
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }
}

}  // namespace jobtrail::shipper
