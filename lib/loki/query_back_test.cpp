#include "loki/query_back.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

#include "common/time.hpp"
#include "loki/push.hpp"
#include "loki_double.hpp"

using namespace jobtrail;

namespace {
constexpr int64_t kHour = 3'600'000'000'000;
constexpr int64_t kDay = 24 * kHour;
}  // namespace

TEST_CASE("query_back: from the newest records back, a day then doubling, stopping when told", "[loki][double]") {
    test::LokiDouble loki({"--reject-old-samples-max-age", std::to_string(500 * 86400)});
    loki::Endpoint ep;
    ep.url = loki.url();
    loki::Client c(ep);
    const int64_t now = realtime_ns();
    std::vector<loki::Stream> s(1);
    s[0].labels = {{"job", "kmsg"}, {"node", "gpu01"}};
    // Records an hour, three days less an hour and a hundred days ago.
    const std::vector<int64_t> at = {now - kHour, now - 3 * kDay + kHour, now - 100 * kDay};
    for (auto it = at.rbegin(); it != at.rend(); ++it) s[0].entries.push_back({*it, "at", {}});
    REQUIRE(c.push(loki::encode_push(s, false)).status == 204);
    const std::string sel = "{job=\"kmsg\", node=\"gpu01\"}";
    std::vector<std::pair<int64_t, int64_t>> pieces;
    std::vector<int64_t> seen;
    auto entry = [&](const loki::QueryEntry& e) { seen.push_back(e.ts_ns); };

    SECTION("the whole window, newest piece first, each piece in time order") {
        const auto r = loki::query_back(c, sel, now - 400 * kDay, now, {}, entry, [&](int64_t a, int64_t b) {
            pieces.emplace_back(a, b);
            return true;
        });
        CHECK_FALSE(r.failed);
        CHECK(r.start_ns == now - 400 * kDay);
        CHECK(seen == at);
        REQUIRE(pieces.size() >= 6);
        CHECK(pieces[0] == std::make_pair(now - kDay, now));
        CHECK(pieces[1] == std::make_pair(now - 3 * kDay, now - kDay));
        CHECK(pieces[2] == std::make_pair(now - 7 * kDay, now - 3 * kDay));
        for (size_t i = 1; i < pieces.size(); ++i) {
            CHECK(pieces[i].second == pieces[i - 1].first);  // no gap, no overlap
            CHECK(pieces[i].second - pieces[i].first <= loki::kQueryBackMaxPieceNs);
        }
    }
    SECTION("a caller that has what it needs stops: nothing older is asked for") {
        const auto r = loki::query_back(c, sel, now - 400 * kDay, now, {}, entry, [&](int64_t a, int64_t b) {
            pieces.emplace_back(a, b);
            return seen.size() < 2;
        });
        CHECK(seen == std::vector<int64_t>{at[0], at[1]});
        CHECK(r.start_ns == now - 3 * kDay);
        CHECK(pieces.size() == 2);
    }
    SECTION("with the index asked first, the pieces without records are stepped over") {
        const auto r = loki::query_back(c, sel, now - 400 * kDay, now, {}, entry,
                                        [&](int64_t a, int64_t b) {
                                            pieces.emplace_back(a, b);
                                            return true;
                                        },
                                        {sel});
        CHECK(r.start_ns == now - 400 * kDay);
        CHECK(seen == at);
        REQUIRE(pieces.size() == 3);  // only the three that hold a record were read
        for (const auto& [a, b] : pieces)
            CHECK(std::count_if(seen.begin(), seen.end(), [&, a = a, b = b](int64_t t) { return t >= a && t < b; }) ==
                  1);
    }
}
