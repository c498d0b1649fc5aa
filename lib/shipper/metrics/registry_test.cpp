#include "shipper/metrics/registry.hpp"

#include <catch2/catch.hpp>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace jobtrail::metrics;
using Catch::Matchers::Contains;

namespace {

// A component that counts something nobody counted before: it declares its metrics here and
// nowhere else.
struct Widgets {
    explicit Widgets(Registry& r)
        : made(r.counter("jobtrail_widgets_made_total", "Widgets made.")),
          queue(r.gauge("jobtrail_widgets_queue", "Widgets waiting.")),
          built_at(r.gauge("jobtrail_widgets_built_timestamp_seconds", "Last widget built.", Unit::kNanosAsSeconds)),
          refused(r.counters("jobtrail_widgets_refused_total", "Widgets refused, by reason and shop.",
                             {"reason", "shop"})) {}
    Counter& made;
    Gauge& queue;
    Gauge& built_at;
    CounterFamily& refused;
};

}  // namespace

TEST_CASE("metrics registry: a component's own counters are rendered with their HELP and TYPE", "[shipper]") {
    Registry r;
    auto& w = r.group<Widgets>();
    CHECK(&r.group<Widgets>() == &w);  // instances of a component share its counters
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&w] {
            for (int i = 0; i < 1000; ++i) ++w.made;
        });
    for (auto& t : threads) t.join();
    w.queue = -3;
    w.built_at = 1'795'989'142'900'000'000;
    w.refused.add({"too_big", "north"}, 2);
    w.refused.add({"odd \"name\"\\", "south"});
    CHECK(r.render() ==
          "# HELP jobtrail_widgets_made_total Widgets made.\n"
          "# TYPE jobtrail_widgets_made_total counter\n"
          "jobtrail_widgets_made_total 4000\n"
          "# HELP jobtrail_widgets_queue Widgets waiting.\n"
          "# TYPE jobtrail_widgets_queue gauge\n"
          "jobtrail_widgets_queue -3\n"
          "# HELP jobtrail_widgets_built_timestamp_seconds Last widget built.\n"
          "# TYPE jobtrail_widgets_built_timestamp_seconds gauge\n"
          "jobtrail_widgets_built_timestamp_seconds 1795989142\n"
          "# HELP jobtrail_widgets_refused_total Widgets refused, by reason and shop.\n"
          "# TYPE jobtrail_widgets_refused_total counter\n"
          "jobtrail_widgets_refused_total{reason=\"odd \\\"name\\\"\\\\\",shop=\"south\"} 1\n"
          "jobtrail_widgets_refused_total{reason=\"too_big\",shop=\"north\"} 2\n");
}

TEST_CASE("metrics registry: values sampled at render time come from the component's hook", "[shipper]") {
    Registry r;
    auto& g = r.gauge("jobtrail_spool_size_bytes", "Bytes in the spool.");
    int64_t size = 10;
    r.on_render([&] { g = size; });
    CHECK(r.render().find("\njobtrail_spool_size_bytes 10\n") != std::string::npos);
    size = 20;
    CHECK(r.render().find("\njobtrail_spool_size_bytes 20\n") != std::string::npos);
}

TEST_CASE("metrics registry: a name declared twice, or not a Prometheus name, is refused", "[shipper]") {
    Registry r;
    r.group<Widgets>();
    // Another component choosing a name already taken would add its counts to the other's.
    CHECK_THROWS_WITH(r.gauge("jobtrail_widgets_made_total", "Also widgets."),
                      Contains("jobtrail_widgets_made_total is declared twice"));
    struct Clash {
        explicit Clash(Registry& r) : c(r.counters("jobtrail_widgets_queue", "Queue.", {"shop"})) {}
        CounterFamily& c;
    };
    CHECK_THROWS_AS(r.group<Clash>(), std::invalid_argument);
    CHECK_THROWS_WITH(r.counter("jobtrail widgets", "x"), Contains("'jobtrail widgets' is not a Prometheus name"));
    CHECK_THROWS_WITH(r.counter("9lives_total", "x"), Contains("not a Prometheus name"));
    CHECK_THROWS_WITH(r.counter("0days_total", "x"), Contains("not a Prometheus name"));
    // Digits after the first character are a name's like any other, 0 included.
    CHECK_NOTHROW(r.counter("jobtrail_http_200_total", "Answers 200."));
    CHECK_NOTHROW(r.counters("jobtrail_by_gpu_total", "By GPU.", {"gpu0_slot"}));
    CHECK_THROWS_WITH(r.counters("jobtrail_x_total", "x", {"__reserved"}), Contains("not a Prometheus label name"));
    CHECK_THROWS_WITH(r.counter("jobtrail_y_total", "two\nlines"), Contains("HELP text spans lines"));
    // A sample must carry every label of its family.
    CHECK_THROWS_AS(r.group<Widgets>().refused.add({"too_big"}), std::invalid_argument);
    // What was refused left nothing behind.
    const std::string text = r.render();
    CHECK(text.find("Also widgets") == std::string::npos);
    CHECK(text.find("jobtrail_x_total") == std::string::npos);
    CHECK(text.find("jobtrail_y_total") == std::string::npos);
    CHECK(text.find("# TYPE jobtrail_http_200_total counter") != std::string::npos);
}

TEST_CASE("metrics registry: names take letters of both cases digits '_' and ':' and labels the same but ':'",
          "[shipper]") {
    Registry r;
    // Each end of each range, inside a name and first.
    CHECK_NOTHROW(r.counter("a09_AZz:x_total", "Ends of each range."));
    CHECK_NOTHROW(r.counter("A_total", "Upper first."));
    CHECK_NOTHROW(r.counter("Z_total", "Upper last."));
    CHECK_NOTHROW(r.counter("z_total", "Lower last."));
    CHECK_NOTHROW(r.counter("_x_total", "Underscore first."));
    CHECK_NOTHROW(r.counter(":x_total", "Colon first."));
    CHECK_NOTHROW(r.counters("jobtrail_labelled_total", "Labels.", {"a09_AZz", "Z", "A", "z"}));
    // One past each end.
    for (const char* bad : {"x`", "x{", "x@", "x[", "x/", "x;", "x-", ""}) {
        INFO(bad);
        CHECK_THROWS_WITH(r.counter(bad, "x"), Contains("is not a Prometheus name"));
        CHECK_THROWS_WITH(r.counters("jobtrail_l_total", "x", {bad}), Contains("is not a Prometheus label name"));
    }
    // A label name has no ':' (a metric name may).
    CHECK_THROWS_WITH(r.counters("jobtrail_l_total", "x", {"a:b"}), Contains("label name 'a:b'"));
    r.group<Widgets>().refused.add({"x", "y"});
    const std::string text = r.render();
    CHECK(text.find("\na09_AZz:x_total 0\n") != std::string::npos);
    CHECK(text.find("jobtrail_l_total") == std::string::npos);
}
