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

TEST_CASE("the Xid table says which source saw each Xid: kernel, dcgm, or kernel+dcgm when both did",
          "[forensics][cli][dcgm]") {
    constexpr int64_t kS = 1'000'000'000;
    const loki::LabelSet gpu3 = {{"gpu", "3"}, {"pci_bdf", "00000000:3B:00.0"}};
    const loki::LabelSet gpu4 = {{"gpu", "4"}, {"pci_bdf", "00000000:5E:00.0"}};
    const loki::LabelSet forged = {{"gpu", "7"}, {"pci_bdf", "00000000:3B:00.0"}};
    XidTable t;
    // gpu01: the kernel and DCGM 1 s apart on the same GPU: one row, both sources.
    t.add("gpu01", 100 * kS, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.");
    t.add_dcgm("gpu01", 101 * kS, "XID 79 on GPU 3", &gpu3);
    // gpu02: the kernel only; gpu03: DCGM only (its other GPU's Xid, and a line naming another
    // GPU's address); not an Xid line: nothing.
    t.add("gpu02", 100 * kS, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.");
    t.add("gpu03", 100 * kS, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.");
    t.add_dcgm("gpu03", 100 * kS, "XID 79 on GPU 4", &gpu4);
    t.add_dcgm("gpu03", 101 * kS, "XID 79 on GPU 3", &forged);
    t.add_dcgm("gpu03", 102 * kS, "Thermal violation on GPU 3: 95 C", &gpu3);
    const auto j = t.json();
    std::vector<std::tuple<std::string, int, uint64_t, std::string>> rows;
    for (const auto& r : j) rows.emplace_back(r["node"], r["xid"], r["count"], r["source"]);
    CHECK(rows == std::vector<std::tuple<std::string, int, uint64_t, std::string>>{{"gpu01", 79, 1, "kernel+dcgm"},
                                                                                   {"gpu02", 79, 1, "kernel"},
                                                                                   {"gpu03", 79, 1, "kernel"},
                                                                                   {"gpu03", 79, 2, "dcgm"}});
    const std::string text = t.text("24h");
    CHECK(text.find(" SOURCE ") != std::string::npos);
    CHECK(text.find("gpu01               79      1  fatal    kernel+dcgm") != std::string::npos);
    CHECK(text.find("gpu03               79      2  fatal    dcgm") != std::string::npos);
}

TEST_CASE("the Xid table lists rows by node whichever source saw them", "[forensics][cli][dcgm]") {
    const loki::LabelSet gpu3 = {{"gpu", "3"}, {"pci_bdf", "00000000:3B:00.0"}};
    XidTable t;
    t.add("gpu02", 100, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.");
    t.add_dcgm("gpu01", 100, "XID 79 on GPU 3", &gpu3);  // DCGM only, on a node before it
    const auto j = t.json();
    REQUIRE(j.size() == 2);
    CHECK(j[0]["node"] == "gpu01");
    CHECK(j[0]["source"] == "dcgm");
    CHECK(j[1]["node"] == "gpu02");
}

TEST_CASE("an Xid both sources saw past the sightings kept: the rest counted as DCGM's, within DCGM's own times",
          "[forensics][cli][dcgm]") {
    // A GPU flapping for hours: 5,000 Xids the kernel and DCGM both report. The first 4,096 of
    // DCGM's are matched against the kernel's; the rest cannot be, and go in a DCGM row whose
    // times are DCGM's, never the epoch.
    constexpr int64_t kS = 1'000'000'000;
    const loki::LabelSet gpu3 = {{"gpu", "3"}, {"pci_bdf", "00000000:3B:00.0"}};
    XidTable t;
    for (int64_t i = 0; i < 5000; ++i) {
        t.add("gpu01", (1000 + i) * kS, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.");
        t.add_dcgm("gpu01", (1000 + i) * kS + kS / 2, "XID 79 on GPU 3", &gpu3);
    }
    const auto j = t.json();
    REQUIRE(j.size() == 2);
    CHECK(j[0]["source"] == "kernel+dcgm");
    CHECK(j[0]["count"] == 5000);
    CHECK(j[1]["source"] == "dcgm");
    CHECK(j[1]["count"] == 5000 - XidTable::kMaxSightings);
    // Which of DCGM's sightings were the unmatched ones is not kept: its times bound them.
    const auto first = jobtrail::parse_rfc3339_ns(j[1]["first"].get<std::string>());
    REQUIRE(first);
    CHECK(*first >= 1000 * kS + kS / 2);
    CHECK(*first <= 5999 * kS + kS / 2);
    CHECK(j[1]["last"] == jobtrail::format_rfc3339_ns(5999 * kS + kS / 2));
    // Within the sightings kept, the DCGM row's times are those of its own sightings only: not
    // the time of a later one the kernel matched.
    XidTable u;
    u.add_dcgm("gpu02", 100 * kS, "XID 79 on GPU 3", &gpu3);
    u.add("gpu02", 200 * kS, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.");
    u.add_dcgm("gpu02", 200 * kS, "XID 79 on GPU 3", &gpu3);
    const auto k = u.json();
    REQUIRE(k.size() == 2);
    CHECK(k[1]["source"] == "dcgm");
    CHECK(k[1]["count"] == 1);
    CHECK(k[1]["first"] == jobtrail::format_rfc3339_ns(100 * kS));
    CHECK(k[1]["last"] == jobtrail::format_rfc3339_ns(100 * kS));
}
