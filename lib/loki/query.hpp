#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loki/client.hpp"
#include "loki/push.hpp"
#include "loki/query_response.hpp"

namespace jobtrail::loki {

struct QueryResult {
    uint64_t entries = 0;
    int requests = 0;
    bool truncated = false;  // stopped at max_entries
    bool failed = false;
    long http_status = 0;  // of the failed request; 0: Loki did not answer
    std::string error;     // what Loki refused and its message, or the transport error
    int64_t start_ns = 0;  // where the query started: later than asked under max_query_lookback
};

struct QueryOptions {
    int page_limit = 5000;     // per request; Loki's default max_entries_limit_per_query is 5000
    uint64_t max_entries = 0;  // 0: no cap
    int max_attempts = 6;      // 429, 5xx and transport errors are retried with backoff
    int64_t backoff_ms = 500;
    // Loki refuses a range longer than max_query_length (default 721h) with 400: longer ranges
    // go in pieces, smaller ones if Loki's 400 names a smaller limit.
    int64_t max_query_length_ns = 721LL * 3600 * 1'000'000'000;
    // Loki's max_query_lookback (0: none): nothing older can be queried, so it is not asked.
    int64_t max_query_lookback_ns = 0;
};

// A duration as Loki prints it: Go's "800h0m0s", "2160h0m58.992s" or Prometheus' "30d1h",
// "1w", "90d", "500ms". nullopt if malformed.
std::optional<int64_t> parse_loki_duration_ns(std::string_view s);

// What Loki refused, in words an operator can act on: HTTP status and Loki's own message.
std::string describe_refusal(long status, std::string_view body);

// Runs a log query over [start_ns, end_ns) forward in time, in pieces of max_query_length, paging the way logcli does:
// each request starts at the last timestamp seen, and entries at that boundary that were already delivered are skipped.
// Entries reach `on_entry` in time order, one page in memory at a time.
QueryResult query_range(Client& client, const std::string& logql, int64_t start_ns, int64_t end_ns,
                        const QueryOptions& opts, const std::function<void(const QueryEntry&)>& on_entry);

struct SeriesResult {
    std::vector<LabelSet> series;  // each label set once (shard labels left out)
    bool failed = false;
    long http_status = 0;
    std::string error;
};

// The streams `match` selects that hold entries in [start_ns, end_ns): Loki answers from its
// index, without reading a line, so it is the cheap way to ask which clusters or nodes hold a
// job. In pieces of max_query_length; at most max_series label sets.
SeriesResult series(Client& client, const std::string& match, int64_t start_ns, int64_t end_ns,
                    const QueryOptions& opts, size_t max_series = 1000);

}  // namespace jobtrail::loki
