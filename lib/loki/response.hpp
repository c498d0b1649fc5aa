#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace jobtrail::loki {

// What the sender does with Loki's answer to a push (../shared/reference: A4, A5, and the
// responses observed from a real Loki).
enum class Verdict {
    kAccepted,     // 2xx but 260: every entry is stored (or was a duplicate)
    kRejected,     // 400 (or another 4xx but 401/403/404/405/407/408/413/429): Loki stored the valid entries;
                   // re-sending cannot help, the rejected ones are counted and logged
    kSplit,        // 413: the request was too large; send it again in smaller pieces
    kRetry,        // 429, 5xx, 408, 3xx, 404/405, 260 (ingestion blocked), timeouts, connection errors:
                   // nothing or not all was stored; send the same bytes again later
    kAuthFailure,  // 401/403/407: a configuration error; keep the data, keep trying slowly
};

struct PushResponse {
    Verdict verdict = Verdict::kRetry;
    long status = 0;
    // Entries refused, by reason, parsed from the body: "too_far_behind", "out_of_order",
    // "too_old", "too_new", "line_too_long", "label_names", "labels", "rate_limited",
    // "per_stream_rate_limit", "stream_limit", "structured_metadata", "other". Loki 3 groups
    // identical validation errors ("N errors like: ...", counted N) and lists at most 10
    // entries of a stream before "total ignored: N out of M" (the rest counted from N).
    std::map<std::string, uint64_t> rejected;
    uint64_t total_ignored = 0;  // sum of "total ignored: N out of M" when present
    uint64_t total_entries = 0;  // sum of the Ms
    // Line bytes of the rejected entries whose length the body gives (Max entry size ... length 'L').
    uint64_t rejected_known_bytes = 0;
    uint64_t rejected_known_entries = 0;
    // The limit a 429 names, in bytes per second (0: none named).
    uint64_t tenant_rate_limit = 0;   // "Ingestion rate limit exceeded ... (limit: N bytes/sec)"
    uint64_t stream_rate_limit = 0;   // "Per stream rate limit exceeded (limit: 64KB/sec)"
    uint64_t rate_limited_bytes = 0;  // "... totaling 'B' bytes" of the tenant's message
    std::string first_message;        // the first line of the body, for one log line per batch
    uint64_t rejected_count() const {
        uint64_t n = 0;
        for (const auto& [_, c] : rejected) n += c;
        return n;
    }
};

// status: the HTTP status, or <= 0 when no answer came (connection error, timeout).
PushResponse classify_push_response(long status, std::string_view body);

}  // namespace jobtrail::loki
