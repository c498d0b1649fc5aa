#include "forensics/xid_table.hpp"

#include <algorithm>
#include <catch2/catch.hpp>

#include "common/time.hpp"
#include "events/xid_catalogue.hpp"

using namespace jobtrail;
using namespace jobtrail::forensics;

TEST_CASE("the Xid table has one row per node and Xid, counted from first to last", "[forensics][cli]") {
    XidTable t;
    CHECK(t.empty());
    CHECK(t.text("24h").ends_with("no Xid in the last 24h\n"));
    t.add("gpu02", 100, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.");
    t.add("gpu01", 150, "NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.");
    t.add("gpu02", 200, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.");
    t.add("gpu02", 300, "mlx5_core 0000:5e:00.0: health compromised - reached miss count");
    REQUIRE_FALSE(t.empty());
    const auto j = t.json();
    REQUIRE(j.size() == 2);
    CHECK(j[0]["node"] == "gpu01");
    CHECK(j[1]["node"] == "gpu02");
    CHECK(j[1]["xid"] == 79);
    CHECK(j[1]["count"] == 2);
    CHECK(j[1]["first"] == format_rfc3339_ns(100));
    CHECK(j[1]["last"] == format_rfc3339_ns(200));
    const std::string text = t.text("24h");
    CHECK(text.starts_with("NODE             "));
    CHECK(text.find("gpu02               79      2  ") != std::string::npos);
    CHECK(text.find("no Xid") == std::string::npos);
}

TEST_CASE("the Xid catalogue lists every code with its severity and actions", "[forensics][cli]") {
    const auto j = xid_catalogue_json();
    CHECK(j.size() == events::xid_catalogue().size());
    CHECK(j[0].contains("nvidia_action"));
    const std::string text = xid_catalogue_text();
    CHECK(text.starts_with("  XID  SEVERITY NVIDIA ACTION      MEANING -> ACTION\n"));
    // Two lines per code, after the heading.
    CHECK(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) == 1 + 2 * events::xid_catalogue().size());
}

TEST_CASE("the Xid table prints the node names Loki returned escaped, never raw to the terminal", "[forensics][cli]") {
    XidTable t;
    // A node (or cluster/node) label as anyone who can push to Loki may set it.
    t.add("evil\x1b]0;owned\x07\x1b[2J/gpu01", 100,
          "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.");
    const std::string text = t.text("24h");
    CHECK(text.find('\x1b') == std::string::npos);
    CHECK(text.find('\x07') == std::string::npos);
    CHECK(text.find("evil\\x1b]0;owned\\x07\\x1b[2J/gpu01") != std::string::npos);
}
