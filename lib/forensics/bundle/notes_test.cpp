#include "forensics/bundle/notes.hpp"

#include <catch2/catch.hpp>

#include "common/time.hpp"

using namespace jobtrail::forensics;

TEST_CASE("bundle: the summary notes a window older than Loki's max_query_lookback only when one is set", "[bundle]") {
    constexpr int64_t kHour = 3'600'000'000'000;
    BundleOptions o;
    bundle::Gathered g;
    const int64_t now = jobtrail::realtime_ns();
    g.window.start_ns = now - 240 * kHour;  // ten days ago, for a day
    g.window.end_ns = now - 216 * kHour;
    const std::string lookback = "the window starts before Loki's max_query_lookback";
    CHECK(bundle::summary_notes(o, g).empty());  // none set: nothing said
    o.query.max_query_lookback_ns = 720 * kHour;
    CHECK(bundle::summary_notes(o, g).empty());  // 30 days: the window is within it
    o.query.max_query_lookback_ns = 168 * kHour;
    const std::string s = bundle::summary_notes(o, g);
    CHECK(s.starts_with("\nNOTE\n----\n" + lookback + " (168 h): records older than "));
    CHECK(s.ends_with(" cannot be queried and are missing\n"));
    // A recent window: late lines may still be invisible.
    g.window.end_ns = now - 4 * kHour;
    o.query.max_query_lookback_ns = 0;
    CHECK(bundle::summary_notes(o, g).find("the window is recent") != std::string::npos);
    // From the node's own files: nothing of Loki's said.
    o.local = true;
    o.query.max_query_lookback_ns = 168 * kHour;
    CHECK(bundle::summary_notes(o, g).empty());
}
