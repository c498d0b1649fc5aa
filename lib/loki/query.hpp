#pragma once

#include <cstdint>
#include <functional>
#include <string>
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
    std::string error;  // why it failed (HTTP status and Loki's message, or the transport error)
};

struct QueryOptions {
    int page_limit = 5000;     // per request; Loki's default max_entries_limit_per_query is 5000
    uint64_t max_entries = 0;  // 0: no cap
    int max_attempts = 6;      // 429, 5xx and transport errors are retried with backoff
    int64_t backoff_ms = 500;
};

// Runs a log query over [start_ns, end_ns) forward in time, paging the way logcli does: each
// request starts at the last timestamp seen, and entries at that boundary that were already
// delivered are skipped. Entries reach `on_entry` in time order, one page in memory at a time.
QueryResult query_range(Client& client, const std::string& logql, int64_t start_ns, int64_t end_ns,
                        const QueryOptions& opts, const std::function<void(const QueryEntry&)>& on_entry);

}  // namespace jobtrail::loki
