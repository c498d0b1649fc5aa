#include "loki/query.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

#include "common/text.hpp"

namespace jobtrail::loki {

QueryResult query_range(Client& client, const std::string& logql, int64_t start_ns, int64_t end_ns,
                        const QueryOptions& opts, const std::function<void(const QueryEntry&)>& on_entry) {
    QueryResult res;
    int page_limit = opts.page_limit;
    int64_t from = start_ns;
    std::set<std::pair<std::string, std::string>> boundary;  // (stream, line) already sent at `from`
    while (from < end_ns) {
        const std::string q = "query=" + Client::url_encode(logql) + "&start=" + std::to_string(from) +
                              "&end=" + std::to_string(end_ns) + "&limit=" + std::to_string(page_limit) +
                              "&direction=forward";
        HttpResult http;
        for (int attempt = 0;; ++attempt) {
            http = client.get("/loki/api/v1/query_range", q);
            ++res.requests;
            const bool retry = (http.status == 0 && !http.too_large) || http.status == 429 || http.status >= 500;
            if (!retry || attempt + 1 >= opts.max_attempts) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(opts.backoff_ms << std::min(attempt, 5)));
        }
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
        if (http.status != 200) {
            res.failed = true;
            // Cut on a character boundary and escaped: the error goes into JSON and onto a terminal.
            std::string_view cut = utf8_prefix(http.body, 300);
            while (!cut.empty() && (cut.back() == '\n' || cut.back() == ' ')) cut.remove_suffix(1);
            const std::string msg = escape_line(cut);
            res.error = http.status ? "HTTP " + std::to_string(http.status) + ": " + msg : http.error;
            return res;
        }
        std::vector<LabelSet> streams;
        std::vector<std::pair<size_t, QueryEntry>> page;
        std::string err;
        if (!parse_streams_response(http.body, streams, page, err)) {
            res.failed = true;
            res.error = "unexpected response: " + err;
            return res;
        }
        std::stable_sort(page.begin(), page.end(),
                         [](const auto& a, const auto& b) { return a.second.ts_ns < b.second.ts_ns; });
        std::vector<std::string> stream_text(streams.size());
        for (size_t i = 0; i < streams.size(); ++i) stream_text[i] = format_labels(streams[i]);
        int64_t last = from;
        size_t fresh = 0;
        std::set<std::pair<std::string, std::string>> next_boundary;
        for (auto& [idx, e] : page) {
            if (e.ts_ns == from && boundary.count({stream_text[idx], e.line})) continue;
            if (opts.max_entries && res.entries >= opts.max_entries) {
                res.truncated = true;
                return res;
            }
            e.labels = &streams[idx];
            on_entry(e);
            ++res.entries;
            ++fresh;
            if (e.ts_ns != last) next_boundary.clear();
            last = e.ts_ns;
            next_boundary.insert({stream_text[idx], e.line});
        }
        if (static_cast<int>(page.size()) < page_limit) break;  // the last page
        if (fresh == 0) {
            // A whole page at one timestamp, all seen: more than page_limit entries share it.
            res.truncated = true;
            from += 1;
            boundary.clear();
            continue;
        }
        if (last == from) {
            boundary.insert(next_boundary.begin(), next_boundary.end());
        } else {
            boundary = std::move(next_boundary);
        }
        from = last;
    }
    return res;
}

}  // namespace jobtrail::loki
