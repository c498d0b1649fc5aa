#include "loki/query.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

#include "common/text.hpp"
#include "common/time.hpp"

namespace jobtrail::loki {

namespace {

// One GET with the query options' retries (429, 5xx, transport errors).
HttpResult get_retried(Client& client, const std::string& path, const std::string& q, const QueryOptions& opts,
                       int& requests) {
    HttpResult http;
    for (int attempt = 0;; ++attempt) {
        http = client.get(path, q);
        ++requests;
        const bool retry = (http.status == 0 && !http.too_large) || http.status == 429 || http.status >= 500;
        if (!retry || attempt + 1 >= opts.max_attempts) return http;
        std::this_thread::sleep_for(std::chrono::milliseconds(opts.backoff_ms << std::min(attempt, 5)));
    }
}

constexpr std::string_view kRangeRefused = "the query time range exceeds the limit (";

// "the query time range exceeds the limit (query length: 800h0m0s, limit: 30d1h)": a 400 that
// names a max_query_length below `span` sets `limit` to it.
void learn_range_limit(const HttpResult& http, int64_t span, int64_t& limit) {
    if (http.status != 400 || http.body.find(kRangeRefused) == std::string::npos) return;
    const size_t at = http.body.find("limit: ", http.body.find(kRangeRefused) + kRangeRefused.size());
    const size_t close = at == std::string::npos ? at : http.body.find(')', at);
    if (close == std::string::npos) return;
    const auto server = parse_loki_duration_ns(std::string_view(http.body).substr(at + 7, close - at - 7));
    // Not below a minute: a Loki that says 1ns must not make us send millions of requests.
    if (server && *server >= 60'000'000'000 && *server < span) limit = *server;
}

// One piece of at most max_query_length. False: stop (failed, or max_entries reached); a 400
// naming a smaller max_query_length sets `limit` to it.
bool query_piece(Client& client, const std::string& logql, int64_t start_ns, int64_t end_ns, const QueryOptions& opts,
                 const std::function<void(const QueryEntry&)>& on_entry, QueryResult& res, int& page_limit,
                 int64_t& limit) {
    int64_t from = start_ns;
    // (stream, line) already delivered at `at_ts`, the timestamp of the last entry delivered: the
    // next page starts at it and gives them again, and a sharded stream can hold one entry twice.
    int64_t at_ts = INT64_MIN;
    std::set<std::pair<std::string, std::string>> seen;
    while (from < end_ns) {
        const std::string q = "query=" + Client::url_encode(logql) + "&start=" + std::to_string(from) +
                              "&end=" + std::to_string(end_ns) + "&limit=" + std::to_string(page_limit) +
                              "&direction=forward";
        const HttpResult http = get_retried(client, "/loki/api/v1/query_range", q, opts, res.requests);
        // A server with a smaller max_entries_limit_per_query says so; page at its limit instead.
        // "max entries limit per query exceeded, limit > max_entries_limit_per_query (5000 > 100)"
        if (http.status == 400 && http.body.find("max_entries_limit_per_query (") != std::string::npos) {
            const size_t gt = http.body.find(" > ", http.body.find("max_entries_limit_per_query ("));
            const int server = gt == std::string::npos ? 0 : std::atoi(http.body.c_str() + gt + 3);
            if (server > 0 && server < page_limit) {
                page_limit = server;
                continue;
            }
        }
        learn_range_limit(http, end_ns - from, limit);
        if (http.status != 200) {
            res.failed = true;
            res.http_status = http.status;
            res.error = http.status ? describe_refusal(http.status, http.body) : http.error;
            return false;
        }
        std::vector<LabelSet> streams;
        std::vector<std::pair<size_t, QueryEntry>> page;
        if (auto st = parse_streams_response(http.body, streams, page); !st.ok) {
            res.failed = true;
            res.error = "unexpected response: " + st.error;
            return false;
        }
        std::stable_sort(page.begin(), page.end(),
                         [](const auto& a, const auto& b) { return a.second.ts_ns < b.second.ts_ns; });
        // Loki stores a stream sent faster than its shard_streams.desired_rate as several streams,
        // __stream_shard__="0".."N-1" beside the unsharded one: to us they are one stream. The
        // label is dropped, and an entry two shards hold (a push Loki stored but did not answer,
        // sent again, lands in other shards) comes once, as Loki keeps it once in one stream.
        std::vector<std::string> stream_text(streams.size());
        for (size_t i = 0; i < streams.size(); ++i) {
            streams[i].erase(std::string(kStreamShardLabel));
            stream_text[i] = format_labels(streams[i]);
        }
        size_t fresh = 0;
        for (auto& [idx, e] : page) {
            if (e.ts_ns != at_ts) {
                at_ts = e.ts_ns;
                seen.clear();
            }
            if (!seen.insert({stream_text[idx], e.line}).second) continue;
            if (opts.max_entries && res.entries >= opts.max_entries) {
                res.truncated = true;
                return false;
            }
            e.labels = &streams[idx];
            on_entry(e);
            ++res.entries;
            ++fresh;
        }
        if (static_cast<int>(page.size()) < page_limit) break;  // the last page
        if (fresh == 0) {
            // A whole page at one timestamp, all seen: more than page_limit entries share it.
            res.truncated = true;
            from += 1;
            seen.clear();
            continue;
        }
        from = std::max(from, at_ts);
    }
    return true;
}

}  // namespace

std::optional<int64_t> parse_loki_duration_ns(std::string_view s) {
    if (s.empty()) return std::nullopt;
    constexpr int64_t kS = 1'000'000'000;
    static const std::pair<std::string_view, int64_t> kUnits[] = {
        {"ns", 1},      {"us", 1'000},     {"\xc2\xb5s", 1'000}, {"ms", 1'000'000},      {"s", kS},
        {"m", 60 * kS}, {"h", 3'600 * kS}, {"d", 86'400 * kS},   {"w", 7 * 86'400 * kS}, {"y", 365 * 86'400 * kS}};
    long double total = 0;
    while (!s.empty()) {
        size_t n = 0;
        while (n < s.size() && ((s[n] >= '0' && s[n] <= '9') || s[n] == '.')) ++n;
        if (n == 0) return std::nullopt;
        const std::string num(s.substr(0, n));
        char* endp = nullptr;
        const long double v = std::strtold(num.c_str(), &endp);
        if (endp != num.c_str() + num.size()) return std::nullopt;
        s.remove_prefix(n);
        int64_t mult = 0;
        for (const auto& [unit, m] : kUnits)
            // Longest first where one unit is the other's prefix: "ms" before "m".
            if (s.substr(0, unit.size()) == unit && (unit != "m" || s.substr(0, 2) != "ms")) {
                mult = m;
                s.remove_prefix(unit.size());
                break;
            }
        if (!mult) return std::nullopt;
        total += v * static_cast<long double>(mult);
        if (total > static_cast<long double>(INT64_MAX)) return std::nullopt;
    }
    return static_cast<int64_t>(total);
}

std::string describe_refusal(long status, std::string_view body) {
    // Cut on a character boundary and escaped: the error goes into JSON and onto a terminal.
    std::string_view cut = utf8_prefix(body, 300);
    while (!cut.empty() && (cut.back() == '\n' || cut.back() == ' ')) cut.remove_suffix(1);
    const std::string said = "HTTP " + std::to_string(status) + ": " + escape_line(cut);
    if (status == 401 && cut == "no org id")
        return "Loki refused the query: no tenant (X-Scope-OrgID) given, and this Loki requires one; set "
               "shipper.loki.tenant in the config or --tenant (" +
               said + ")";
    if (status == 401 || status == 403) return "Loki refused our credentials (" + said + ")";
    if (status == 400 && cut.find(kRangeRefused) != std::string_view::npos)
        return "Loki refused the query's time range (its max_query_length; see --max-query-length) (" + said + ")";
    if (status == 400 && cut.find("max_entries_limit_per_query") != std::string_view::npos)
        return "Loki refused the page size (its max_entries_limit_per_query) (" + said + ")";
    if (status == 400 || status == 422) return "Loki refused the query (" + said + ")";
    if (status == 429) return "Loki refused the query: too many requests (" + said + ")";
    return said;  // 5xx: Loki's own failure, not a refusal
}

QueryResult query_range(Client& client, const std::string& logql, int64_t start_ns, int64_t end_ns,
                        const QueryOptions& opts, const std::function<void(const QueryEntry&)>& on_entry) {
    QueryResult res;
    // Loki answers nothing older than its lookback (it moves start up itself): not asked for.
    if (opts.max_query_lookback_ns > 0) start_ns = std::max(start_ns, realtime_ns() - opts.max_query_lookback_ns);
    res.start_ns = start_ns;
    int page_limit = opts.page_limit;
    int64_t limit = opts.max_query_length_ns > 0 ? opts.max_query_length_ns : INT64_MAX;
    for (int64_t from = start_ns; from < end_ns;) {
        const int64_t to = end_ns - from > limit ? from + limit : end_ns;
        const int64_t asked = limit;
        const uint64_t before = res.entries;
        if (query_piece(client, logql, from, to, opts, on_entry, res, page_limit, limit)) {
            from = to;
            continue;
        }
        // Loki named a smaller max_query_length before this piece gave anything: split finer.
        if (res.failed && limit < asked && limit < to - from && res.entries == before) {
            res.failed = false;
            res.http_status = 0;
            res.error.clear();
            continue;
        }
        break;
    }
    return res;
}

SeriesResult series(Client& client, const std::string& match, int64_t start_ns, int64_t end_ns,
                    const QueryOptions& opts, size_t max_series) {
    SeriesResult res;
    if (opts.max_query_lookback_ns > 0) start_ns = std::max(start_ns, realtime_ns() - opts.max_query_lookback_ns);
    int64_t limit = opts.max_query_length_ns > 0 ? opts.max_query_length_ns : INT64_MAX;
    std::set<LabelSet> seen;
    int requests = 0;
    for (int64_t from = start_ns; from < end_ns && !res.failed;) {
        const int64_t to = end_ns - from > limit ? from + limit : end_ns;
        const std::string q =
            "match[]=" + Client::url_encode(match) + "&start=" + std::to_string(from) + "&end=" + std::to_string(to);
        const HttpResult http = get_retried(client, "/loki/api/v1/series", q, opts, requests);
        std::vector<LabelSet> got;
        const int64_t asked = limit;
        learn_range_limit(http, to - from, limit);
        if (limit < asked) continue;  // Loki named a smaller max_query_length: this piece again, smaller
        if (http.status != 200) {
            res.failed = true;
            res.http_status = http.status;
            res.error = http.status ? describe_refusal(http.status, http.body) : http.error;
        } else if (auto st = parse_series_response(http.body, got, max_series); !st.ok) {
            res.failed = true;
            res.error = "unexpected response: " + st.error;
        }
        for (auto& l : got) {
            l.erase(std::string(kStreamShardLabel));
            if (seen.size() < max_series && seen.insert(l).second) res.series.push_back(std::move(l));
        }
        from = to;
    }
    return res;
}

}  // namespace jobtrail::loki
