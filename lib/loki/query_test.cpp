#include "loki/query.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <thread>

#include "common/time.hpp"
#include "loki/push.hpp"
#include "loki_double.hpp"

using namespace jobtrail::loki;

namespace {

// Sets the double's fault (tests/loki_double/loki_double.py, POST /-/fault).
void fault_query(jobtrail::test::LokiDouble& loki, const std::string& json) {
    CURL* h = curl_easy_init();
    const std::string url = loki.url() + "/-/fault";
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, json.c_str());
    REQUIRE(curl_easy_perform(h) == CURLE_OK);
    curl_easy_cleanup(h);
}

}  // namespace

TEST_CASE("query_range pages past the server's entry limit: every entry once, in time order", "[loki][double]") {
    // 2,500 entries in two streams, many sharing timestamps across streams and a run of 40 at one
    // instant: exactly where a page boundary loses or repeats entries if paging is wrong.
    jobtrail::test::LokiDouble loki({"--max-entries-limit", "100", "--ingestion-rate-mb", "100", "--burst-mb", "100"});
    Endpoint ep;
    ep.url = loki.url();
    Client c(ep);
    const int64_t t0 = jobtrail::realtime_ns() - 3'600'000'000'000;
    std::vector<Stream> streams(2);
    for (int s = 0; s < 2; ++s) {
        streams[s].labels = {{"job", "t"}, {"node", "n" + std::to_string(s)}};
        for (int i = 0; i < 1250; ++i) {
            const int64_t ts = (i >= 600 && i < 640) ? t0 + 600 : t0 + i;
            streams[s].entries.push_back({ts, "s" + std::to_string(s) + " " + std::to_string(i), {}});
        }
    }
    REQUIRE(c.push(encode_push(streams, false)).status == 204);

    std::map<std::string, int> seen;
    int64_t last = 0;
    bool ordered = true;
    QueryOptions o;
    o.page_limit = 5000;  // more than the server allows: it says so, and we page at its limit
    const auto r = query_range(c, "{job=\"t\"}", t0, t0 + 10'000, o, [&](const QueryEntry& e) {
        ++seen[e.line];
        ordered &= e.ts_ns >= last;
        last = e.ts_ns;
        REQUIRE(e.labels->at("job") == "t");
    });
    CHECK_FALSE(r.failed);
    CHECK(r.entries == 2500);
    CHECK(seen.size() == 2500);
    CHECK(ordered);
    CHECK(r.requests >= 25);
    for (const auto& [line, n] : seen) REQUIRE(n == 1);
}

TEST_CASE("query_range over more than two pages at one instant: no entry twice, the rest after it all",
          "[loki][double]") {
    // 60 entries before T, 250 at T (more than two pages of 100), 60 after. Loki pages by time, so
    // past the first page at T it gives the same entries again: each must be passed on once, and
    // the query must move past T (saying it skipped some) instead of looping.
    jobtrail::test::LokiDouble loki({"--max-entries-limit", "100", "--ingestion-rate-mb", "100", "--burst-mb", "100"});
    Endpoint ep;
    ep.url = loki.url();
    Client c(ep);
    const int64_t t0 = jobtrail::realtime_ns() - 3'600'000'000'000;
    const int64_t at = t0 + 1000;
    std::vector<Stream> streams(2);
    for (int s = 0; s < 2; ++s) {
        streams[s].labels = {{"job", "b"}, {"node", "n" + std::to_string(s)}};
        for (int i = 0; i < 30; ++i)
            streams[s].entries.push_back({t0 + i, "before " + std::to_string(s) + "-" + std::to_string(i), {}});
        for (int i = 0; i < 125; ++i)
            streams[s].entries.push_back({at, "at " + std::to_string(s) + "-" + std::to_string(i), {}});
        for (int i = 0; i < 30; ++i)
            streams[s].entries.push_back({at + 1 + i, "after " + std::to_string(s) + "-" + std::to_string(i), {}});
    }
    REQUIRE(c.push(encode_push(streams, false)).status == 204);

    std::map<std::string, int> seen;
    QueryOptions o;
    o.page_limit = 100;
    o.max_entries = 2000;  // a loop over the same instant ends here instead of never
    const auto r = query_range(c, "{job=\"b\"}", t0, t0 + 10'000, o, [&](const QueryEntry& e) { ++seen[e.line]; });
    CHECK_FALSE(r.failed);
    int before = 0, at_t = 0, after = 0, twice = 0;
    for (const auto& [line, n] : seen) {
        twice += n > 1;
        before += line.rfind("before ", 0) == 0;
        at_t += line.rfind("at ", 0) == 0;
        after += line.rfind("after ", 0) == 0;
    }
    CHECK(twice == 0);
    CHECK(r.entries == seen.size());
    CHECK(before == 60);
    CHECK(after == 60);
    CHECK(at_t >= 100);  // at least a page of them
    CHECK(r.truncated);  // and it says that entries at T were left out
    CHECK(r.requests < 20);
}

TEST_CASE("query_range reports Loki's refusal and parse errors instead of an empty result", "[loki][double]") {
    jobtrail::test::LokiDouble loki;
    Endpoint ep;
    ep.url = loki.url();
    Client c(ep);
    const auto r = query_range(c, "{job=", 0, 1'000'000, {}, [](const QueryEntry&) {});
    CHECK(r.failed);
    CHECK(r.http_status == 400);
    CHECK(r.error.find("Loki refused the query (HTTP 400: parse error") == 0);

    std::vector<LabelSet> streams;
    std::vector<std::pair<size_t, QueryEntry>> entries;
    auto st =
        parse_streams_response(R"({"status":"success","data":{"resultType":"matrix","result":[]}})", streams, entries);
    CHECK_FALSE(st.ok);
    CHECK(st.error.find("metric query") != std::string::npos);
    st = parse_streams_response(
        R"({"status":"success","data":{"resultType":"streams","result":[{"stream":{},"values":[["x","l"]]}]}})",
        streams, entries);
    CHECK_FALSE(st.ok);
    CHECK(st.error.find("nanoseconds") != std::string::npos);

    // A proxy in front of Loki that answers 200 with its own page: a failed query that says
    // so, never an empty success (a bundle would call itself complete with nothing in it).
    fault_query(loki, R"({"mode": "status", "status": 200, "body": "<html>sign in</html>", "target": "query"})");
    size_t got = 0;
    // 40 days: pieces of Loki's 721 h. The query stops at the garbled one, as at any failure.
    const int64_t now = jobtrail::realtime_ns();
    const auto page =
        query_range(c, "{job=\"t\"}", now - 40 * 86'400LL * 1'000'000'000, now, {}, [&](const QueryEntry&) { ++got; });
    CHECK(page.failed);
    CHECK(page.error.rfind("unexpected response: ", 0) == 0);
    CHECK(page.requests == 1);
    CHECK(got == 0);
}

TEST_CASE("a response with fields of the wrong type is refused, not thrown", "[loki]") {
    // Found by the fuzzer: json::value() throws on a non-string "status".
    std::vector<LabelSet> streams;
    std::vector<std::pair<size_t, QueryEntry>> entries;
    CHECK_FALSE(parse_streams_response(R"({"status":4214680680132})", streams, entries).ok);
    const auto st = parse_streams_response(R"({"status":"success","data":{"resultType":7}})", streams, entries);
    CHECK_FALSE(st.ok);
    CHECK_FALSE(st.error.empty());
}

TEST_CASE("a response larger than the cap fails the request and says so, with or without a length", "[loki][double]") {
    jobtrail::test::LokiDouble loki;
    Endpoint ep;
    ep.url = loki.url();
    ep.max_response_bytes = 1 << 20;
    Client c(ep);
    // Just under the cap: still an answer (the cap is not off by a chunk).
    fault_query(loki, R"({"mode": "big", "target": "query", "bytes": 1048576})");
    HttpResult r = c.get("/loki/api/v1/query_range", "query=%7Bjob%3D%22t%22%7D");
    CHECK(r.status == 200);
    CHECK(r.body.size() == 1048576);
    CHECK_FALSE(r.too_large);
    for (const bool length : {true, false}) {
        INFO("Content-Length sent: " << length);
        fault_query(loki, std::string(R"({"mode": "big", "target": "query", "bytes": 3000000, "length": )") +
                              (length ? "true" : "false") + "}");
        r = c.get("/loki/api/v1/query_range", "query=%7Bjob%3D%22t%22%7D");
        CHECK(r.too_large);
        CHECK(r.body.empty());
        CHECK(r.error == "response from " + loki.url() + "/loki/api/v1/query_range larger than 1048576 bytes");
    }
    // query_range: one request, not six retries, and the error is the one above.
    QueryOptions qo;
    qo.backoff_ms = 1;
    const auto q = query_range(c, "{job=\"t\"}", 0, 1'000'000'000, qo, [](const QueryEntry&) {});
    CHECK(q.failed);
    CHECK(q.requests == 1);
    CHECK(q.error.find("larger than 1048576 bytes") != std::string::npos);
}

namespace {
constexpr int64_t kDay = 86'400LL * 1'000'000'000;

// Entries 35, 20 and 0 days old, in a double with Loki's query limits (seconds).
struct LimitedLoki {
    jobtrail::test::LokiDouble loki;
    int64_t now = jobtrail::realtime_ns();
    explicit LimitedLoki(std::vector<std::string> args) : loki(with(std::move(args))) {
        Endpoint ep;
        ep.url = loki.url();
        Client c(ep);
        Stream s;
        s.labels = {{"job", "t"}};
        for (int64_t age : {35, 20, 0})
            s.entries.push_back({now - age * kDay - 1000, "age " + std::to_string(age), {}});
        REQUIRE(c.push(encode_push({s}, false)).status == 204);
    }
    static std::vector<std::string> with(std::vector<std::string> a) {
        a.insert(a.end(), {"--reject-old-samples-max-age", "8640000", "--max-chunk-age", "8640000"});
        return a;
    }
    QueryResult query(const QueryOptions& o, std::vector<std::string>& got) {
        Endpoint ep;
        ep.url = loki.url();
        Client c(ep);
        return query_range(c, "{job=\"t\"}", now - 40 * kDay, now, o,
                           [&](const QueryEntry& e) { got.push_back(e.line); });
    }
};
}  // namespace

TEST_CASE("a 40-day query goes in pieces of Loki's max_query_length, learning a smaller one", "[loki][double]") {
    SECTION("721h, Loki's default") {
        LimitedLoki l({"--max-query-length", std::to_string(721 * 3600)});
        std::vector<std::string> got;
        const auto r = l.query({}, got);
        CHECK_FALSE(r.failed);
        CHECK(r.error.empty());
        CHECK(got == std::vector<std::string>{"age 35", "age 20", "age 0"});
    }
    SECTION("a Loki set to 10 days says so in its 400, and we split by that") {
        LimitedLoki l({"--max-query-length", std::to_string(10 * 86'400)});
        std::vector<std::string> got;
        const auto r = l.query({}, got);
        CHECK_FALSE(r.failed);
        CHECK(got == std::vector<std::string>{"age 35", "age 20", "age 0"});
        CHECK(r.requests >= 5);  // the refused 721h piece, then 4 of 10 days
    }
    SECTION("max_query_lookback: what is older is not asked for") {
        LimitedLoki l(
            {"--max-query-length", std::to_string(721 * 3600), "--max-query-lookback", std::to_string(30 * 86'400)});
        QueryOptions o;
        o.max_query_lookback_ns = 30 * kDay;
        std::vector<std::string> got;
        const auto r = l.query(o, got);
        CHECK_FALSE(r.failed);
        CHECK(got == std::vector<std::string>{"age 20", "age 0"});
        CHECK(r.start_ns >= l.now - 30 * kDay);
    }
}

TEST_CASE("series: the label sets of the streams with entries in the range, each once, learning a smaller limit",
          "[loki][double]") {
    LimitedLoki l({"--max-query-length", std::to_string(10 * 86'400)});
    Endpoint ep;
    ep.url = l.loki.url();
    Client c(ep);
    std::vector<Stream> streams(2);
    streams[0].labels = {{"job", "t"}, {"cluster", "a"}};
    streams[0].entries = {{l.now - 30 * kDay, "a's, a month ago", {}}};
    streams[1].labels = {{"job", "t"}, {"cluster", "b"}};
    streams[1].entries = {{l.now - 1000, "b's, now", {}}};
    REQUIRE(c.push(encode_push(streams, false)).status == 204);
    auto clusters = [&](int64_t from) {
        const auto r = series(c, "{job=\"t\", cluster=~\".+\"}", from, l.now, {});
        INFO(r.error);
        CHECK_FALSE(r.failed);
        std::vector<std::string> out;
        for (const auto& s : r.series) out.push_back(s.at("cluster"));
        std::sort(out.begin(), out.end());
        return out;
    };
    CHECK(clusters(l.now - 40 * kDay) == std::vector<std::string>{"a", "b"});  // 721h refused: 10 days at a time
    CHECK(clusters(l.now - kDay) == std::vector<std::string>{"b"});
    const auto bad = series(c, "{job=\"t\"", l.now - kDay, l.now, {});
    CHECK(bad.failed);
    CHECK(bad.http_status == 400);
}

TEST_CASE("Loki's durations and refusals in words", "[loki]") {
    CHECK(parse_loki_duration_ns("30d1h") == 721LL * 3'600'000'000'000);
    CHECK(parse_loki_duration_ns("800h0m0s") == 800LL * 3'600'000'000'000);
    CHECK(parse_loki_duration_ns("2160h0m58.992s") == 2160LL * 3'600'000'000'000 + 58'992'000'000);
    CHECK(parse_loki_duration_ns("1w") == 7 * kDay);
    CHECK(parse_loki_duration_ns("500ms") == 500'000'000);
    CHECK_FALSE(parse_loki_duration_ns("30 days"));
    CHECK_FALSE(parse_loki_duration_ns(""));
    const std::string tenant = describe_refusal(401, "no org id\n");
    CHECK(tenant.find("shipper.loki.tenant") != std::string::npos);
    CHECK(tenant.find("X-Scope-OrgID") != std::string::npos);
    CHECK(tenant.find("credentials") == std::string::npos);
    CHECK(describe_refusal(401, "bad password").find("credentials") != std::string::npos);
    CHECK(describe_refusal(400, "the query time range exceeds the limit (query length: 800h0m0s, limit: 30d1h)")
              .find("max_query_length") != std::string::npos);
}

TEST_CASE("the shards of a stream are one stream: no __stream_shard__ label, an entry two shards hold comes once",
          "[loki][double]") {
    // desired_rate 64KB: 100 KB pushes are sharded once the double's rate store has seen the
    // stream (a second and a half after its first push).
    jobtrail::test::LokiDouble loki({"--shard-desired-rate-kb", "64", "--max-entries-limit", "300"});
    Endpoint ep;
    ep.url = loki.url();
    Client c(ep);
    const int64_t t0 = jobtrail::realtime_ns() - 600'000'000'000;
    auto push = [&](int from, int n) {
        Stream s;
        s.labels = {{"job", "nccl"}, {"node", "n1"}, {"file", "0.n1.7.log"}};
        for (int i = from; i < from + n; ++i)
            s.entries.push_back({t0 + i * 1000, "line " + std::to_string(i) + " " + std::string(90, 'x'), {}});
        REQUIRE(c.push(encode_push({s}, false)).status == 204);
    };
    push(0, 1000);  // not sharded: Loki does not know the stream's rate yet
    std::this_thread::sleep_for(std::chrono::milliseconds(1600));
    push(1000, 1000);  // sharded
    // 1499..1999 sent again with the next lines (as after a push Loki stored but never answered,
    // batched anew): entry by entry round robin puts them in other shards, where they are new.
    push(1499, 1001);
    push(2500, 500);
    const HttpResult store = c.get("/-/store", "");
    REQUIRE(store.status == 200);
    auto count = [&](const std::string& what) {
        size_t n = 0;
        for (size_t at = store.body.find(what); at != std::string::npos; at = store.body.find(what, at + 1)) ++n;
        return n;
    };
    REQUIRE(count("\"__stream_shard__\"") >= 2);
    REQUIRE(count("\"line ") > 3000);  // some entries twice, in two shards

    std::vector<int> got;
    bool labels_ok = true;
    const auto r = query_range(c, "{job=\"nccl\"}", t0, t0 + 10'000'000, {}, [&](const QueryEntry& e) {
        got.push_back(std::stoi(e.line.substr(5)));
        labels_ok &= !e.labels->count("__stream_shard__") && e.labels->at("file") == "0.n1.7.log";
    });
    CHECK_FALSE(r.failed);
    CHECK(labels_ok);
    CHECK(r.entries == 3000);
    std::vector<int> want(3000);
    for (int i = 0; i < 3000; ++i) want[i] = i;
    CHECK(got == want);  // each once, in time order, across pages of 300
}

TEST_CASE("a query response Loki could not have sent is refused, saying what is wrong", "[loki]") {
    // Bytes read back from a server (or whatever answers in its place) are untrusted: each shape
    // is refused with its own reason, nothing is thrown, and no entry of it is taken.
    struct Row {
        const char* body;
        const char* error;
    };
    const Row rows[] = {
        {"not json at all", "response is not JSON"},
        {R"(["status","success"])", "response is not JSON"},
        {R"({"data":{"resultType":"streams","result":[]}})", "status is not success"},
        {R"({"status":"error","data":{"resultType":"streams","result":[]}})", "status is not success"},
        {R"({"status":"success"})", "data.resultType is not streams"},
        {R"({"status":"success","data":[]})", "data.resultType is not streams"},
        {R"({"status":"success","data":{"result":[]}})", "data.resultType is not streams"},
        {R"({"status":"success","data":{"resultType":"streams"}})", "data.result is not a list"},
        {R"({"status":"success","data":{"resultType":"streams","result":{}}})", "data.result is not a list"},
        {R"({"status":"success","data":{"resultType":"streams","result":[7]}})",
         "a result entry lacks stream or values"},
        {R"({"status":"success","data":{"resultType":"streams","result":[{"values":[]}]}})",
         "a result entry lacks stream or values"},
        {R"({"status":"success","data":{"resultType":"streams","result":[{"stream":[],"values":[]}]}})",
         "a result entry lacks stream or values"},
        {R"({"status":"success","data":{"resultType":"streams","result":[{"stream":{}}]}})",
         "a result entry lacks stream or values"},
        {R"({"status":"success","data":{"resultType":"streams","result":[{"stream":{},"values":{}}]}})",
         "a result entry lacks stream or values"},
        {R"({"status":"success","data":{"resultType":"streams","result":[{"stream":{},"values":["1"]}]}})",
         "a value is not"},
        {R"({"status":"success","data":{"resultType":"streams","result":[{"stream":{},"values":[["1"]]}]}})",
         "a value is not"},
        {R"({"status":"success","data":{"resultType":"streams","result":[{"stream":{},"values":[[1,"l"]]}]}})",
         "a value is not"},
        {R"({"status":"success","data":{"resultType":"streams","result":[{"stream":{},"values":[["1",2]]}]}})",
         "a value is not"},
        {R"({"status":"success","data":{"resultType":"streams","result":[{"stream":{},"values":[["","l"]]}]}})",
         "a timestamp is not nanoseconds: "},
        {R"({"status":"success","data":{"resultType":"streams","result":[{"stream":{},"values":[["17x","l"]]}]}})",
         "a timestamp is not nanoseconds: 17x"},
    };
    for (const auto& row : rows) {
        INFO(row.body);
        std::vector<LabelSet> streams;
        std::vector<std::pair<size_t, QueryEntry>> entries;
        const auto st = parse_streams_response(row.body, streams, entries);
        CHECK_FALSE(st.ok);
        CHECK(st.error.find(row.error) == 0);
        CHECK(entries.empty());
    }
}

TEST_CASE("a query response's streams and entries as Loki 3 sends them, metadata element and all", "[loki]") {
    // Reference §9: with categorize-labels each value has a third element; a label that is not a
    // string is no label. Entries say which stream they are of.
    const std::string body =
        R"({"status":"success","data":{"resultType":"streams","encodingFlags":["categorize-labels"],"result":[)"
        R"({"stream":{"job":"smjob","probe":"p9","n":5},"values":[["1796113480011844213","level=error msg=boom",)"
        R"({"structuredMetadata":{"detected_level":"error"}}]]},)"
        R"({"stream":{"job":"other"},"values":[["2","a"],["3","b"]]}],"stats":{}}})"
        "\n";
    std::vector<LabelSet> streams;
    std::vector<std::pair<size_t, QueryEntry>> entries;
    const auto st = parse_streams_response(body, streams, entries);
    INFO(st.error);
    REQUIRE(st.ok);
    REQUIRE(streams.size() == 2);
    CHECK(streams[0] == LabelSet{{"job", "smjob"}, {"probe", "p9"}});
    CHECK(streams[1] == LabelSet{{"job", "other"}});
    REQUIRE(entries.size() == 3);
    CHECK(entries[0].first == 0);
    CHECK(entries[0].second.ts_ns == 1796113480011844213);
    CHECK(entries[0].second.line == "level=error msg=boom");
    CHECK(entries[1].first == 1);
    CHECK(entries[1].second.ts_ns == 2);
    CHECK(entries[2].first == 1);
    CHECK(entries[2].second.line == "b");
}

TEST_CASE("a series response: label sets up to the cap, anything else refused", "[loki]") {
    const std::string three = R"({"status":"success","data":[{"job":"a","n":1},{"job":"b"},{"job":"c"}]})"
                              "\n";
    for (size_t max : {1, 2, 3, 4}) {
        INFO("max " << max);
        std::vector<LabelSet> series;
        REQUIRE(parse_series_response(three, series, max).ok);
        REQUIRE(series.size() == std::min<size_t>(max, 3));
        CHECK(series[0] == LabelSet{{"job", "a"}});
    }
    struct Row {
        const char* body;
        const char* error;
    };
    const Row rows[] = {
        {"<html>bad gateway</html>", "response is not JSON"},
        {"[]", "response is not JSON"},
        {R"({"data":[]})", "status is not success"},
        {R"({"status":"success"})", "data is not a list of label sets"},
        {R"({"status":"success","data":{}})", "data is not a list of label sets"},
        {R"({"status":"success","data":[{"job":"a"},"job"]})", "a series is not a label set"},
    };
    for (const auto& row : rows) {
        INFO(row.body);
        std::vector<LabelSet> series;
        const auto st = parse_series_response(row.body, series, 10);
        CHECK_FALSE(st.ok);
        CHECK(st.error == row.error);
    }
}

TEST_CASE("each refusal in words an operator can act on, Loki's message cut and escaped", "[loki]") {
    struct Row {
        long status;
        std::string body;
        std::string said;
    };
    const Row rows[] = {
        {401, "no org id\n",
         "Loki refused the query: no tenant (X-Scope-OrgID) given, and this Loki requires one; set "
         "shipper.loki.tenant in the config or --tenant (HTTP 401: no org id)"},
        {401, "unauthorized\n", "Loki refused our credentials (HTTP 401: unauthorized)"},
        {403, "forbidden", "Loki refused our credentials (HTTP 403: forbidden)"},
        {400, "the query time range exceeds the limit (query length: 800h0m0s, limit: 30d1h)",
         "Loki refused the query's time range (its max_query_length; see --max-query-length) (HTTP 400: the query "
         "time range exceeds the limit (query length: 800h0m0s, limit: 30d1h))"},
        {400, "max entries limit per query exceeded, limit > max_entries_limit_per_query (10000 > 5000)",
         "Loki refused the page size (its max_entries_limit_per_query) (HTTP 400: max entries limit per query "
         "exceeded, limit > max_entries_limit_per_query (10000 > 5000))"},
        {400, "parse error at line 1, col 1: syntax error: unexpected IDENTIFIER",
         "Loki refused the query (HTTP 400: parse error at line 1, col 1: syntax error: unexpected IDENTIFIER)"},
        {422, "unprocessable", "Loki refused the query (HTTP 422: unprocessable)"},
        {429, "Too Many Requests\n", "Loki refused the query: too many requests (HTTP 429: Too Many Requests)"},
        {500, "multiple org IDs present", "HTTP 500: multiple org IDs present"},
        {502, "\n \n", "HTTP 502: "},
        {404, "", "HTTP 404: "},
        {400, "bad\x01 line\n", "Loki refused the query (HTTP 400: bad\\x01 line)"},
        {503, std::string(400, 'x'), "HTTP 503: " + std::string(300, 'x')},
    };
    for (const auto& row : rows) {
        INFO("HTTP " << row.status << " " << row.body.substr(0, 40));
        CHECK(describe_refusal(row.status, row.body) == row.said);
    }
    // A message whose 300th byte is inside a character is cut before that character.
    CHECK(describe_refusal(500, std::string(299, 'x') + "\xc3\xa9 and on") == "HTTP 500: " + std::string(299, 'x'));
}

namespace {
// A double holding `n` entries of {job="r"}, "e0", "e1", ..., `step_s` seconds apart from t0, and a client to it.
struct FilledLoki {
    jobtrail::test::LokiDouble loki;
    int64_t t0 = jobtrail::realtime_ns() - 600'000'000'000;
    explicit FilledLoki(int n, std::vector<std::string> args = {}, int64_t step_s = 1) : loki(std::move(args)) {
        Stream s;
        s.labels = {{"job", "r"}};
        for (int i = 0; i < n; ++i)
            s.entries.push_back({t0 + i * step_s * 1'000'000'000LL, "e" + std::to_string(i), {}});
        REQUIRE(client().push(encode_push({s}, false)).status == 204);
    }
    Client client() {
        Endpoint ep;
        ep.url = loki.url();
        return Client(ep);
    }
    QueryResult query(const QueryOptions& o, std::vector<std::string>& got, int64_t span_s = 3600) {
        Client c = client();
        return query_range(c, "{job=\"r\"}", t0, t0 + span_s * 1'000'000'000LL, o,
                           [&](const QueryEntry& e) { got.push_back(e.line); });
    }
};
}  // namespace

TEST_CASE("a query retries 429 and 5xx up to its attempts, a 400 not at all", "[loki][double]") {
    QueryOptions o;
    o.backoff_ms = 1;
    o.max_attempts = 3;
    SECTION("two 503s, then the answer: three requests, every entry") {
        FilledLoki l(3);
        fault_query(l.loki, R"({"mode":"status","status":503,"count":2,"target":"query"})");
        std::vector<std::string> got;
        const auto r = l.query(o, got);
        CHECK_FALSE(r.failed);
        CHECK(r.requests == 3);
        CHECK(got == std::vector<std::string>{"e0", "e1", "e2"});
    }
    SECTION("429 every time: as many requests as attempts, then the refusal") {
        FilledLoki l(3);
        fault_query(l.loki, R"({"mode":"status","status":429,"body":"Too Many Requests\n","target":"query"})");
        std::vector<std::string> got;
        const auto r = l.query(o, got);
        CHECK(r.failed);
        CHECK(r.requests == 3);
        CHECK(r.http_status == 429);
        CHECK(r.error == "Loki refused the query: too many requests (HTTP 429: Too Many Requests)");
        CHECK(got.empty());
    }
    SECTION("500 is retried as well") {
        FilledLoki l(1);
        fault_query(l.loki, R"({"mode":"status","status":500,"count":1,"target":"query"})");
        std::vector<std::string> got;
        const auto r = l.query(o, got);
        CHECK_FALSE(r.failed);
        CHECK(r.requests == 2);
        CHECK(got.size() == 1);
    }
    SECTION("a 400 is Loki's answer: asked once") {
        FilledLoki l(1);
        fault_query(l.loki, R"({"mode":"status","status":400,"body":"parse error","target":"query"})");
        std::vector<std::string> got;
        const auto r = l.query(o, got);
        CHECK(r.failed);
        CHECK(r.requests == 1);
        CHECK(r.http_status == 400);
    }
    SECTION("no answer at all: retried, then the transport's error") {
        Endpoint ep;
        {
            jobtrail::test::LokiDouble gone;
            ep.url = gone.url();
        }  // stopped: its port refuses connections now
        Client c(ep);
        const auto r = query_range(c, "{job=\"r\"}", 0, 1'000'000'000, o, [](const QueryEntry&) {});
        CHECK(r.failed);
        CHECK(r.http_status == 0);
        CHECK(r.requests == 3);
        CHECK_FALSE(r.error.empty());
    }
}

TEST_CASE("max_entries stops the query after exactly that many entries and says it was cut", "[loki][double]") {
    FilledLoki l(6);
    for (uint64_t max : {uint64_t{4}, uint64_t{6}, uint64_t{0}}) {
        INFO("max_entries " << max);
        QueryOptions o;
        o.max_entries = max;
        std::vector<std::string> got;
        const auto r = l.query(o, got);
        CHECK_FALSE(r.failed);
        CHECK(got.size() == (max == 4 ? 4u : 6u));
        CHECK(r.entries == got.size());
        CHECK(r.truncated == (max == 4));
    }
}

TEST_CASE("a max_query_length of one minute is learned and a shorter one is not", "[loki][double]") {
    // Reference §10: Loki names its limit in the 400. Down to a minute, the query goes on in
    // pieces that short; a Loki naming less is refused, not sent thousands of requests.
    SECTION("1m: four pieces after the refused first request") {
        FilledLoki l(5, {"--max-query-length", "60"}, 40);  // at 0, 40, 80, 120 and 160 s
        std::vector<std::string> got;
        const auto r = l.query({}, got, 200);
        INFO(r.error);
        CHECK_FALSE(r.failed);
        CHECK(got == std::vector<std::string>{"e0", "e1", "e2", "e3", "e4"});
        CHECK(r.requests == 5);  // the refused 200 s, then 60 + 60 + 60 + 20 s
    }
    SECTION("30s: refused, and said") {
        FilledLoki l(1, {"--max-query-length", "30"});
        std::vector<std::string> got;
        const auto r = l.query({}, got, 200);
        CHECK(r.failed);
        CHECK(r.http_status == 400);
        CHECK(r.requests == 1);
        CHECK(r.error.find("Loki refused the query's time range") == 0);
        CHECK(r.error.find("limit: 30s") != std::string::npos);
    }
    SECTION("no max_query_length of ours: one request for the whole range") {
        FilledLoki l(3);
        QueryOptions o;
        o.max_query_length_ns = 0;
        std::vector<std::string> got;
        const auto r = l.query(o, got, 10 * 86'400);
        CHECK_FALSE(r.failed);
        CHECK(r.requests == 1);
        CHECK(got.size() == 3);
    }
}

TEST_CASE("series over several pieces: a stream in many of them comes once, and the cap holds across pieces",
          "[loki][double]") {
    LimitedLoki l({"--max-query-length", std::to_string(10 * 86'400)});  // {job="t"}: 35, 20 and 0 days old
    Endpoint ep;
    ep.url = l.loki.url();
    Client c(ep);
    Stream node;
    node.labels = {{"job", "t"}, {"node", "x"}};
    node.entries = {{l.now - 15 * kDay, "x's", {}}};  // in a piece of its own
    REQUIRE(c.push(encode_push({node}, false)).status == 204);
    // The node label of each series found ("" for none); Loki 3 adds service_name to each.
    auto nodes = [](const SeriesResult& r) {
        std::vector<std::string> out;
        for (const auto& s : r.series) out.push_back(s.count("node") ? s.at("node") : "");
        return out;
    };
    const auto all = series(c, "{job=\"t\"}", l.now - 40 * kDay, l.now, {});
    INFO(all.error);
    CHECK_FALSE(all.failed);
    auto got = nodes(all);
    std::sort(got.begin(), got.end());
    CHECK(got == std::vector<std::string>{"", "x"});
    // One at most: the first piece's ({job="t"}, 35 days old), none of the later pieces'.
    const auto one = series(c, "{job=\"t\"}", l.now - 40 * kDay, l.now, {}, 1);
    CHECK_FALSE(one.failed);
    CHECK(nodes(one) == std::vector<std::string>{""});
}
