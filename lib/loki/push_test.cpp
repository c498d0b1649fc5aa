#include "loki/push.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "common/time.hpp"
#include "loki/client.hpp"
#include "loki/response.hpp"
#include "loki_double.hpp"

using namespace jobtrail::loki;

TEST_CASE("label sets in Prometheus text form", "[loki]") {
    CHECK(format_labels({{"node", "gpu01"}, {"job", "kmsg"}}) == "{job=\"kmsg\", node=\"gpu01\"}");
    CHECK(format_labels({{"a", "q\"u\\o\nte"}}) == "{a=\"q\\\"u\\\\o\\nte\"}");
    CHECK(valid_label_name("job_id"));
    CHECK(valid_label_name("_x1"));
    CHECK_FALSE(valid_label_name("bad-name"));
    CHECK_FALSE(valid_label_name("1abc"));
    CHECK_FALSE(valid_label_name("__reserved"));
    CHECK_FALSE(valid_label_name(""));
}

TEST_CASE("a push reaches a Loki (test double, independent decoder) byte for byte", "[loki][double]") {
    jobtrail::test::LokiDouble loki;
    Endpoint ep;
    ep.url = loki.url();
    Client c(ep);
    const int64_t now = jobtrail::realtime_ns();
    Stream s{{{"job", "kmsg"}, {"node", "gpu01"}, {"service_name", "kmsg"}},
             {{now, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", {{"xid", "79"}, {"seq", "4242"}}},
              {now + 1, "second line \xe2\x82\xac", {}}}};
    auto res = c.push(encode_push({s}, true));
    INFO(res.error << res.body);
    REQUIRE(res.status == 204);
    CHECK(classify_push_response(res.status, res.body).verdict == Verdict::kAccepted);

    auto store = nlohmann::json::parse(c.get("/-/store", "").body);
    REQUIRE(store.size() == 1);
    CHECK(store[0]["labels"]["node"] == "gpu01");
    REQUIRE(store[0]["entries"].size() == 2);
    CHECK(store[0]["entries"][0][0] == std::to_string(now));
    CHECK(store[0]["entries"][0][1] == "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.");
    CHECK(store[0]["entries"][0][2]["xid"] == "79");
    CHECK(store[0]["entries"][1][1] == "second line \xe2\x82\xac");

    // The same bytes again: Loki deduplicates, the store is unchanged.
    REQUIRE(c.push(encode_push({s}, true)).status == 204);
    store = nlohmann::json::parse(c.get("/-/store", "").body);
    CHECK(store[0]["entries"].size() == 2);

    // Without structured metadata support the entries go without it.
    Stream t{{{"job", "plain"}}, {{now, "x", {{"k", "v"}}}}};
    REQUIRE(c.push(encode_push({t}, false)).status == 204);
    auto q = nlohmann::json::parse(
        c.get("/loki/api/v1/query_range", "query=" + Client::url_encode("{job=\"plain\"}") + "&start=0").body);
    CHECK(q["data"]["result"][0]["stream"].size() == 1);
}

TEST_CASE("transport errors and Loki errors are told apart", "[loki][double]") {
    Endpoint ep;
    ep.url = "http://127.0.0.1:9";  // discard port: nothing listens
    ep.timeout_ms = 2000;
    Client c(ep);
    auto res = c.push(encode_push(std::vector<Stream>{}, true));
    CHECK(res.status == 0);
    CHECK_FALSE(res.error.empty());
    CHECK(classify_push_response(res.status, res.body).verdict == Verdict::kRetry);

    jobtrail::test::LokiDouble loki({"--auth"});
    Endpoint ep2;
    ep2.url = loki.url();
    Client unauth(ep2);
    auto r = unauth.push(encode_push({{{{"job", "x"}}, {{jobtrail::realtime_ns(), "x", {}}}}}, true));
    CHECK(r.status == 401);
    CHECK(classify_push_response(r.status, r.body).verdict == Verdict::kAuthFailure);
    ep2.tenant = "team-a";
    Client tenant(ep2);
    CHECK(tenant.push(encode_push({{{{"job", "x"}}, {{jobtrail::realtime_ns(), "x", {}}}}}, true)).status == 204);
}
