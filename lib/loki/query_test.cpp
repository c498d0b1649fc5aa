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
    auto fault = [&](const std::string& json) {
        CURL* h = curl_easy_init();
        const std::string url = loki.url() + "/-/fault";
        curl_easy_setopt(h, CURLOPT_URL, url.c_str());
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, json.c_str());
        REQUIRE(curl_easy_perform(h) == CURLE_OK);
        curl_easy_cleanup(h);
    };
    // Just under the cap: still an answer (the cap is not off by a chunk).
    fault(R"({"mode": "big", "target": "query", "bytes": 1048576})");
    HttpResult r = c.get("/loki/api/v1/query_range", "query=%7Bjob%3D%22t%22%7D");
    CHECK(r.status == 200);
    CHECK(r.body.size() == 1048576);
    CHECK_FALSE(r.too_large);
    for (const bool length : {true, false}) {
        INFO("Content-Length sent: " << length);
        fault(std::string(R"({"mode": "big", "target": "query", "bytes": 3000000, "length": )") +
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
