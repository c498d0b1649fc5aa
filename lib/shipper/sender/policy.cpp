#include "shipper/sender/policy.hpp"

#include <algorithm>

namespace jobtrail::shipper {
namespace {

// A held-back stream (or the tenant) says so at most once every kSayEveryNs.
bool may_say(int64_t& said_ns, int64_t now) {
    if (said_ns != 0 && now - said_ns < ResponsePolicy::kSayEveryNs) return false;
    said_ns = now;
    return true;
}

ResponsePolicy::Say held_back(std::string text) {
    return {Severity::kWarning, event::kStreamRateLimited, std::move(text) + " (data stays in the spool)"};
}

}  // namespace

void ResponsePolicy::Decision::count_rejected(std::map<std::string, uint64_t>& by_reason) const {
    if (rejected)
        for (const auto& [reason, count] : *rejected) by_reason[reason] += count;
    if (unreported) by_reason["unreported"] += unreported;
    if (!dropped_reason.empty()) by_reason[std::string(dropped_reason)] += 1;
}

uint64_t ResponsePolicy::request_cap(Stream& s, int64_t now) {
    if (s.learned_ns && now - s.learned_ns > reprobe_ns_) {
        // What Loki's answers taught is probed again: its limits change (and a restart's
        // answers are not its limits).
        s.rate_bps = 0;
        s.cap_bytes = 0;
        s.cap_grows = false;
        s.learned_ns = 0;
    }
    // The tenant's rate too, capped or not: a stale rate would make larger stream limits look
    // implausible for good.
    if ((tenant_.cap || tenant_.rate) && now - tenant_.learned_ns > reprobe_ns_) tenant_.cap = tenant_.rate = 0;
    uint64_t cap = cfg_.batch_max_bytes;
    // Pushes of a quarter of the stream's pace: Loki's rate store sees it steady, never a
    // burst above its shard threshold.
    if (cfg_.max_stream_rate) cap = std::min(cap, std::max<uint64_t>(1, cfg_.max_stream_rate / 4));
    if (s.cap_bytes) cap = std::min(cap, s.cap_bytes);
    if (tenant_.cap) cap = std::min(cap, tenant_.cap);
    return cap;
}

void ResponsePolicy::recovered(Stream& s, int64_t since, int64_t now) {
    if (s.failing_since_ns && s.failing_since_ns >= since && s.next_try_ns > now) s.next_try_ns = now;
}

ResponsePolicy::Decision ResponsePolicy::decide(Stream& s, std::string_view stream, const Sent& sent,
                                                const loki::PushResponse& v, std::string_view transport_error,
                                                int64_t now) {
    Decision d;
    if (v.verdict == loki::Verdict::kAccepted || v.verdict == loki::Verdict::kRejected) {
        d.outage_since_ns = failing_since_ns_;
        failing_since_ns_ = 0;
        s.failing_since_ns = 0;
    }
    switch (v.verdict) {
        case loki::Verdict::kAccepted:
            d.action = Action::kStored;
            d.stored_entries = sent.entries;
            d.stored_bytes = sent.line_bytes;
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
            pace(s, sent, now);
            s.attempt = 0;
            return d;
        case loki::Verdict::kRejected: {
            d.action = Action::kRejected;
            // One stream per request: everything the body names is of these entries. Entries
            // that reached the ingester are its "out of M"; those fewer went unreported.
            uint64_t n = std::min<uint64_t>(v.rejected_count(), sent.entries);
            d.rejected = &v.rejected;
            if (v.total_entries && v.total_entries < sent.entries && n < sent.entries) {
                d.unreported = std::min<uint64_t>(sent.entries - v.total_entries, sent.entries - n);
                n += d.unreported;
            }
            // Bytes of the accepted part: exact where the body gives lengths, else the average.
            const uint64_t known_n = std::min(v.rejected_known_entries, n);
            const uint64_t known_b = std::min(v.rejected_known_bytes, sent.line_bytes);
            const uint64_t rest_n = sent.entries - known_n, rest_b = sent.line_bytes - known_b;
            const uint64_t other_rejected = n - known_n;
            d.stored_entries = sent.entries - n;
            d.stored_bytes = rest_n ? rest_b - rest_b * other_rejected / rest_n : 0;
            d.say = Say{Severity::kWarning, event::kRejected,
                        "Loki rejected " + std::to_string(n) + " of " + std::to_string(sent.entries) +
                            " entries (HTTP " + std::to_string(v.status) + "), not retried: " + v.first_message};
            pace(s, sent, now);
            s.attempt = 0;
            return d;
        }
        case loki::Verdict::kSplit:
            if (sent.entries <= 1) {
                d.action = Action::kDropped;
                d.dropped_reason = "request_too_large";
                d.say = Say{Severity::kWarning, event::kEntryTooLarge,
                            "Loki refused a single entry as too large (HTTP 413); dropped"};
                s.attempt = 0;
                return d;
            }
            d.action = Action::kSplit;
            s.cap_bytes = std::max<uint64_t>(1, sent.bytes / 2);
            s.cap_grows = false;  // a size Loki refused stays refused
            s.learned_ns = now;
            return d;
        case loki::Verdict::kAuthFailure:
        case loki::Verdict::kRetry:
            break;
    }
    d.retry = true;
    if (v.status == 429) {
        rate_limited(s, stream, sent, v, now, d);
        return d;
    }
    if (s.attempt == 0 || s.attempt % 10 == 0) {
        const bool auth = v.verdict == loki::Verdict::kAuthFailure;
        // Loki without a tenant says "no org id": name the setting that fixes it.
        const bool no_tenant = v.status == 401 && v.first_message.find("no org id") != std::string::npos;
        d.say = Say{auth ? Severity::kError : Severity::kWarning, auth ? event::kAuthFailed : event::kPushFailed,
                    std::string(no_tenant ? "Loki wants a tenant: set shipper.loki.tenant (sent as X-Scope-OrgID)"
                                : auth    ? "Loki refused our credentials"
                                          : "Loki push failed") +
                        " (" +
                        (v.status ? "HTTP " + std::to_string(v.status) + ": " + v.first_message
                                  : std::string(transport_error)) +
                        "); retrying, data stays in the spool"};
    }
    d.action = Action::kBackoff;
    backoff(s, now);
    if (!s.failing_since_ns) s.failing_since_ns = now;
    if (!failing_since_ns_) failing_since_ns_ = now;
    return d;
}

// What a 429 says of Loki's limits is a hint to check, never the truth: a limit Loki names is
// taken only when it is plausible (after a restart Loki names its WAL replay's unlimited rate,
// "8EB"), a wait is never longer than max_backoff, and what was learned is probed again after
// kReprobeNs. A 429 that names no usable limit (a proxy's, another Loki's) halves the stream's
// requests, down to one entry, instead of repeating the same one.
void ResponsePolicy::rate_limited(Stream& s, std::string_view stream, const Sent& sent, const loki::PushResponse& v,
                                  int64_t now, Decision& d) {
    const auto plausible = [&](uint64_t limit) {
        return limit >= kMinPlausibleRate && limit <= kMaxPlausibleRate && (!tenant_.rate || limit <= tenant_.rate);
    };
    const int64_t max_wait = cfg_.max_backoff_ms * 1'000'000;
    if (v.tenant_rate_limit >= kMinPlausibleRate && v.tenant_rate_limit <= kMaxPlausibleRate) {
        // The tenant's limit takes a push whole: pieces below its rate, then ordinary backoff.
        tenant_.rate = v.tenant_rate_limit;
        tenant_.learned_ns = now;
        d.tenant_rate_limit = v.tenant_rate_limit;
        if (sent.bytes > v.tenant_rate_limit / 2) {
            const uint64_t below = std::max<uint64_t>(1, v.tenant_rate_limit / 2);
            tenant_.cap = tenant_.cap ? std::min(tenant_.cap, below) : below;
        }
        if (may_say(tenant_.said_ns, now))
            d.say = Say{Severity::kWarning, event::kTenantRateLimited,
                        "Loki's ingestion rate limit for the tenant (" + std::to_string(v.tenant_rate_limit) +
                            " bytes/s) refused a push of " + std::to_string(sent.bytes) +
                            " bytes; sending smaller pushes, data stays in the spool: " + v.first_message};
        d.action = Action::kBackoff;
        backoff(s, now);
        return;
    }
    const bool per_stream = v.rejected.count("per_stream_rate_limit") != 0;
    if (per_stream && plausible(v.stream_rate_limit)) {
        // Per-stream rate: below it with room for the burst to refill, paced at it. Refused
        // again after a paced wait, the burst is smaller than our piece: halve.
        const bool repeat = s.rate_bps == v.stream_rate_limit && s.cap_bytes && sent.bytes <= s.cap_bytes;
        s.rate_bps = v.stream_rate_limit;
        s.learned_ns = now;
        d.stream_rate_limit = v.stream_rate_limit;
        const uint64_t below = std::max<uint64_t>(1, v.stream_rate_limit * 3 / 4);
        s.cap_bytes =
            repeat ? std::max<uint64_t>(1, sent.bytes / 2) : std::min(s.cap_bytes ? s.cap_bytes : below, below);
        s.cap_grows = false;
        // One entry larger than a second of the stream's limit, refused three times: it never
        // gets in; counted, not retried forever. One that fits waits for the bucket, as any.
        if (sent.entries == 1 && sent.bytes > v.stream_rate_limit && ++s.single_refusals >= 3) {
            d.action = Action::kDropped;
            d.dropped_reason = "per_stream_rate_limit";
            d.say = Say{Severity::kWarning, event::kEntryOverStreamLimit,
                        "Loki's per-stream rate limit refused one entry of " + std::to_string(sent.bytes - 1) +
                            " bytes three times; dropped: " + v.first_message};
            s.single_refusals = 0;
            s.attempt = 0;
            return;
        }
        if (may_say(s.said_ns, now))
            d.say = held_back("Loki's per-stream rate limit (" + std::to_string(v.stream_rate_limit) +
                              " bytes/s) holds back " + std::string(stream) + "; pacing it at that rate");
        d.action = Action::kPaced;
        s.next_try_ns =
            now + std::clamp<int64_t>(int64_t(sent.bytes * 1'000'000'000 / s.rate_bps), cfg_.min_backoff_ms * 1'000'000,
                                      std::max<int64_t>(max_wait, 1'000'000));
        return;
    }
    // No limit we can use: halve what the stream sends, down to one entry, and back off. A lone
    // entry is never dropped for it: a limit nobody named may be gone at the next try.
    s.cap_bytes = std::max<uint64_t>(1, sent.bytes / 2);
    s.cap_grows = true;
    s.learned_ns = now;
    if (may_say(s.said_ns, now)) {
        const std::string named = per_stream && v.stream_rate_limit
                                      ? "a per-stream limit of " + std::to_string(v.stream_rate_limit) +
                                            " bytes/s, which cannot be the limit (Loki restarted?)"
                                  : per_stream ? "its per-stream limit in a form we cannot read"
                                               : "no limit we can read";
        d.say = held_back("Loki answered 429 for " + std::string(stream) + " naming " + named + "; sending " +
                          std::to_string(s.cap_bytes) + " bytes at most and retrying: " + v.first_message);
    }
    d.action = Action::kBackoff;
    backoff(s, now);
}

// The stream's bucket refills at the named rate (or our own pace, below Loki's shard
// threshold): the next request waits for what this took. A wait Loki's answer asks for is never
// longer than max_backoff (the answer may be wrong); our own pace is ours.
void ResponsePolicy::pace(Stream& s, const Sent& sent, int64_t now) const {
    int64_t wait = 0;
    if (s.rate_bps)
        wait = std::min<int64_t>(int64_t(sent.bytes * 1'000'000'000 / s.rate_bps), cfg_.max_backoff_ms * 1'000'000);
    if (cfg_.max_stream_rate) wait = std::max(wait, int64_t(sent.bytes * 1'000'000'000 / cfg_.max_stream_rate));
    if (wait) s.next_try_ns = std::max(s.next_try_ns, now + wait);
}

void ResponsePolicy::backoff(Stream& s, int64_t now) {
    int64_t d = cfg_.min_backoff_ms;
    for (int i = 0; i < s.attempt && d < cfg_.max_backoff_ms; ++i) d *= 2;
    d = std::min(d, cfg_.max_backoff_ms);
    d = d / 2 + static_cast<int64_t>(rng_() % static_cast<uint32_t>(d / 2 + 1));  // jitter: [d/2, d]
    s.next_try_ns = std::max(s.next_try_ns, now + d * 1'000'000);
    ++s.attempt;
}

}  // namespace jobtrail::shipper
