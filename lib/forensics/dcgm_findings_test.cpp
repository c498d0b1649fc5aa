#include <catch2/catch.hpp>
#include <string>

#include "forensics/analysis.hpp"
#include "forensics/dcgm_lines.hpp"
#include "forensics/logql.hpp"
#include "forensics/node_view.hpp"
#include "forensics/xid_table.hpp"

using namespace jobtrail;
using namespace jobtrail::forensics;

namespace {

constexpr int64_t kS = 1'000'000'000;
constexpr int64_t kT0 = 1'780'000'000 * kS;
const char* kKernel79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.";

loki::LabelSet dcgm_labels(const std::string& gpu, const std::string& bdf) {
    return {{"cluster", "c1"}, {"node", "gpu01"}, {"job", "dcgm"}, {"gpu", gpu},
            {"pci_bdf", bdf},  {"event", "xid"},  {"xid", "79"},   {"severity", "fatal"}};
}

int count_kind(const std::vector<Finding>& fs, const std::string& source) {
    int n = 0;
    for (const auto& f : fs) n += f.source == source;
    return n;
}

}  // namespace

TEST_CASE("a DCGM Xid and the kernel's Xid line for the same GPU and code within 10 s are one finding",
          "[forensics][dcgm]") {
    for (const bool dcgm_first : {false, true}) {
        Analyzer a;
        const auto labels = dcgm_labels("3", "00000000:3B:00.0");
        if (dcgm_first) a.add_dcgm("gpu01", kT0 + 1 * kS, "XID 79 on GPU 3", &labels);
        a.add("gpu01", "kmsg", kT0, kKernel79);
        if (!dcgm_first) a.add_dcgm("gpu01", kT0 + 1 * kS, "XID 79 on GPU 3", &labels);
        const auto fs = a.findings();
        REQUIRE(fs.size() == 1);
        CHECK(fs[0].source == "kmsg");
        CHECK(fs[0].xid == 79);
        CHECK(fs[0].count == 1);
        CHECK(fs[0].dcgm);
        CHECK(fs[0].title.find("corroborated by kernel and DCGM") != std::string::npos);
        CHECK(a.summary_text().find("corroborated by kernel and DCGM") != std::string::npos);
        CHECK(a.summary_text().find("not in the kernel ring") == std::string::npos);
    }
}

TEST_CASE("another GPU, another Xid or 30 s apart: the DCGM Xid is a finding of its own", "[forensics][dcgm]") {
    struct Case {
        const char* what;
        std::string line, gpu, bdf;
        int64_t at;
    };
    for (const auto& c : {Case{"other GPU", "XID 79 on GPU 4", "4", "00000000:5E:00.0", kT0 + kS},
                          Case{"other code", "XID 31 on GPU 3", "3", "00000000:3B:00.0", kT0 + kS},
                          Case{"30 s apart", "XID 79 on GPU 3", "3", "00000000:3B:00.0", kT0 + 30 * kS}}) {
        INFO(c.what);
        Analyzer a;
        a.add("gpu01", "kmsg", kT0, kKernel79);
        const auto labels = dcgm_labels(c.gpu, c.bdf);
        a.add_dcgm("gpu01", c.at, c.line, &labels);
        const auto fs = a.findings();
        REQUIRE(fs.size() == 2);
        CHECK(count_kind(fs, "kmsg") == 1);
        CHECK(count_kind(fs, "dcgm") == 1);
        for (const auto& f : fs) {
            CHECK_FALSE(f.dcgm);
            if (f.source == "dcgm") CHECK(f.title.find("seen by DCGM, not in the kernel ring") != std::string::npos);
        }
    }
}

TEST_CASE("a DCGM Xid on another node's GPU of the same address does not corroborate", "[forensics][dcgm]") {
    Analyzer a;
    a.add("gpu01", "kmsg", kT0, kKernel79);
    const auto labels = dcgm_labels("3", "00000000:3B:00.0");
    a.add_dcgm("gpu02", kT0 + kS, "XID 79 on GPU 3", &labels);
    CHECK(a.findings().size() == 2);
}

TEST_CASE("a forged DCGM line neither merges with nor hides the kernel's finding", "[forensics][dcgm][hostile]") {
    struct Case {
        const char* what;
        loki::LabelSet labels;
    };
    // The line names GPU 3: metadata that names another GPU, an address that is none, or no
    // metadata at all leave the device unknown, so nothing can be joined to it.
    for (const auto& c : {Case{"metadata gpu is another", dcgm_labels("5", "00000000:3B:00.0")},
                          Case{"metadata gpu is not a number", dcgm_labels("3 ", "00000000:3B:00.0")},
                          Case{"pci_bdf is no address", dcgm_labels("3", "0000:3b:00.0; rm -rf /")},
                          Case{"pci_bdf empty", dcgm_labels("3", "")}, Case{"no metadata", {}}}) {
        INFO(c.what);
        Analyzer a;
        a.add("gpu01", "kmsg", kT0, kKernel79);
        a.add_dcgm("gpu01", kT0 + kS, "XID 79 on GPU 3", &c.labels);
        const auto fs = a.findings();
        REQUIRE(fs.size() == 2);
        for (const auto& f : fs) {
            CHECK_FALSE(f.dcgm);
            if (f.source == "kmsg") CHECK(f.title.rfind("Xid 79 on 0000:3b:00", 0) == 0);
            if (f.source == "dcgm") CHECK(f.pci_bdf.empty());
        }
    }
}

TEST_CASE("DCGM's text decides the event: metadata and lines parse_line rejects make no finding",
          "[forensics][dcgm][hostile]") {
    Analyzer a;
    const auto labels = dcgm_labels("3", "00000000:3B:00.0");  // says xid 79, fatal
    for (const char* junk : {"XID 79 on GPU 3; rm -rf /", "XID 79 on GPU 99999999999999999999", "XID 0 on GPU 3",
                             "XID 99999999 on GPU 3", "hello", ""})
        a.add_dcgm("gpu01", kT0, junk, &labels);
    CHECK(a.findings().empty());
    // The metadata says Xid 79, fatal; the line says Xid 13: the line's verdict, not the metadata's.
    a.add_dcgm("gpu01", kT0, "XID 13 on GPU 3", &labels);
    const auto fs = a.findings();
    REQUIRE(fs.size() == 1);
    CHECK(fs[0].xid == 13);
    CHECK(fs[0].severity == events::xid_event(13, "", "x").severity);
}

TEST_CASE("DCGM's other events are in the summary with their severity", "[forensics][dcgm]") {
    Analyzer a;
    const auto labels = dcgm_labels("3", "00000000:3B:00.0");
    a.add_dcgm("gpu01", kT0, "Double-bit ECC error on GPU 3: 2 errors in device", &labels);
    a.add_dcgm("gpu01", kT0 + kS, "Thermal violation on GPU 3: 95 C", &labels);
    a.add_dcgm("gpu01", kT0 + 2 * kS, "Power violation on GPU 3: 720 W", &labels);
    a.add_dcgm("gpu01", kT0 + 3 * kS, "NVLink errors on GPU 3: counter 12 (field 449)", &labels);
    a.add_dcgm("gpu01", kT0 + 4 * kS, "DCGM_FR_VOLATILE_DBE_DETECTED on GPU 3 (mem, fail): Detected 2 volatile DBEs",
               &labels);
    const auto fs = a.findings();
    REQUIRE(fs.size() == 5);
    const std::string s = a.summary_text();
    const auto sev = [](const char* line) {
        return std::string(events::severity_name(dcgm::severity(*dcgm::parse_line(line))));
    };
    CHECK(s.find("[" + sev("Double-bit ECC error on GPU 3: 2 errors in device") +
                 "] Double-bit ECC error on GPU 3 (0000:3b:00): 2 errors in device") != std::string::npos);
    CHECK(s.find("[warning] Thermal violation on GPU 3 (0000:3b:00): 95 C") != std::string::npos);
    CHECK(s.find("[warning] Power violation on GPU 3 (0000:3b:00): 720 W") != std::string::npos);
    CHECK(s.find("[error] NVLink errors on GPU 3 (0000:3b:00): counter 12 (field 449)") != std::string::npos);
    CHECK(s.find("[error] DCGM_FR_VOLATILE_DBE_DETECTED on GPU 3 (0000:3b:00) (mem, fail): Detected 2 volatile DBEs") !=
          std::string::npos);
    // The double-bit error is the worst: the likely cause.
    REQUIRE(a.likely_cause(fs));
    CHECK(a.likely_cause(fs)->kind == "dcgm-ecc_dbe");
}

TEST_CASE("jobtrail node: a DCGM event on a job's GPU hits that job, and a forged address is node-wide",
          "[forensics][dcgm]") {
    NodeView v("gpu01");
    v.add_job_line("7", "prolog", kT0, "meta", "", "user=alice");
    v.add_job_line("7", "prolog", kT0, "device", "", "kind=gpu index=3 bdf=0000:3b:00.0 serial=S3");
    const auto own = dcgm_labels("3", "00000000:3B:00.0");
    const auto forged = dcgm_labels("5", "00000000:3B:00.0");
    v.add_dcgm(kT0 + 10 * kS, "XID 79 on GPU 3", &own);
    v.add_dcgm(kT0 + 11 * kS, "Thermal violation on GPU 3: 95 C", &forged);
    v.add_dcgm(kT0 + 12 * kS, "not DCGM's", &own);
    REQUIRE(v.events().size() == 2);
    CHECK(v.events()[0].source == "dcgm");
    CHECK(v.events()[0].basis == "device");
    CHECK(v.events()[0].jobs == std::vector<std::string>{"7"});
    CHECK(v.events()[1].basis == "node");
    const std::string t = v.text(kT0, kT0 + 60 * kS, "loki");
    CHECK(t.find("[fatal] DCGM: Xid 79 on GPU 3 (0000:3b:00): ") != std::string::npos);
    CHECK(t.find("GPU has fallen off the bus\n    hit job 7: its GPU 3 (0000:3b:00.0, serial S3)") !=
          std::string::npos);
    CHECK(t.find("[warning] DCGM: Thermal violation on GPU 3: 95 C\n    node-wide: jobs 7") != std::string::npos);
}

TEST_CASE("DCGM's queries: a node's events, the job's, and the fleet's Xids by their text", "[forensics][dcgm]") {
    const Scope s;
    CHECK(dcgm_query(s, "n1") == R"({job="dcgm", node="n1"})");
    CHECK(dcgm_xid_query(s, {}) == R"({job="dcgm"} |~ "^XID [0-9]+ on GPU [0-9]+$")");
    bool nodes = false, own = false;
    for (const auto& q : job_queries(s, "77", {"n1"}, true)) {
        nodes |= q.logql == R"({job="dcgm", node="n1"})";
        own |= q.logql == R"({job="dcgm"} | slurm_job_id="77")";
    }
    CHECK(nodes);
    CHECK(own);
}

TEST_CASE("each DCGM Xid is paired with a kernel line within 10 s, whatever order the lines came in",
          "[forensics][dcgm]") {
    const auto labels = dcgm_labels("3", "00000000:3B:00.0");
    Analyzer a;
    // Kernel lines at 0, 40 and 20 s (in that order), DCGM's at 41 s (the 40 s line's) and 100 s
    // (none's) and 25 s (the 20 s line's).
    for (const int64_t s : {0, 40, 20}) a.add("gpu01", "kmsg", kT0 + s * kS, kKernel79);
    for (const int64_t s : {41, 100, 25}) a.add_dcgm("gpu01", kT0 + s * kS, "XID 79 on GPU 3", &labels);
    const auto fs = a.findings();
    REQUIRE(fs.size() == 2);
    CHECK(fs[0].source == "kmsg");
    CHECK(fs[0].count == 3);
    CHECK(fs[0].dcgm);
    CHECK(fs[1].source == "dcgm");
    CHECK(fs[1].count == 1);
    CHECK(fs[1].ts_ns == kT0 + 100 * kS);

    XidTable t;
    for (const int64_t s : {40, 0, 20})
        t.add("gpu01", kT0 + s * kS, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.");
    for (const int64_t s : {25, 100, 41}) t.add_dcgm("gpu01", kT0 + s * kS, "XID 79 on GPU 3", &labels);
    const auto j = t.json();
    REQUIRE(j.size() == 2);
    CHECK((j[0]["source"] == "kernel+dcgm" && j[0]["count"] == 3));
    CHECK((j[1]["source"] == "dcgm" && j[1]["count"] == 1));
}

TEST_CASE("DCGM's health incident for an Xid (DCGM_FR_XID_ERROR) is the same sighting, not another finding",
          "[forensics][dcgm]") {
    // DCGM's health watch files Xid 48, 74, 79, 119, ... as DCGM_FR_XID_ERROR "Detected XID %u for
    // GPU %u" (dcgm_errors.h, DcgmHealthWatch.cpp) beside the XID policy violation.
    Analyzer a;
    const auto labels = dcgm_labels("3", "00000000:3B:00.0");
    a.add("gpu01", "kmsg", kT0, kKernel79);
    a.add_dcgm("gpu01", kT0 + 1 * kS, "XID 79 on GPU 3", &labels);
    a.add_dcgm("gpu01", kT0 + 2 * kS, "DCGM_FR_XID_ERROR on GPU 3 (all, fail): Detected XID 79 for GPU 3", &labels);
    a.add_dcgm("gpu01", kT0 + 40 * kS, "DCGM_FR_XID_ERROR on GPU 3 (all) cleared", &labels);
    auto fs = a.findings();
    REQUIRE(fs.size() == 1);
    CHECK(fs[0].dcgm);
    CHECK(fs[0].xid == 79);

    // Only the health incident, no kernel line: one DCGM Xid finding with the catalogue's verdict.
    Analyzer b;
    b.add_dcgm("gpu01", kT0, "DCGM_FR_XID_ERROR on GPU 3 (all, fail): Detected XID 79 for GPU 3", &labels);
    fs = b.findings();
    REQUIRE(fs.size() == 1);
    CHECK(fs[0].xid == 79);
    CHECK(fs[0].severity == events::Severity::kFatal);
    CHECK(fs[0].title.find("seen by DCGM, not in the kernel ring") != std::string::npos);

    // A message that names another GPU than the incident's is not taken for an Xid of either.
    Analyzer c;
    c.add_dcgm("gpu01", kT0, "DCGM_FR_XID_ERROR on GPU 3 (all, fail): Detected XID 79 for GPU 4", &labels);
    fs = c.findings();
    REQUIRE(fs.size() == 1);
    CHECK(fs[0].xid == 0);
}

TEST_CASE("a DCGM Xid from 1 to 65535 is an event, 0 and 65536 are not", "[forensics][dcgm][hostile]") {
    const auto labels = dcgm_labels("3", "00000000:3B:00.0");
    for (const int64_t xid : {1, 65'535}) {
        const auto r = read_dcgm("XID " + std::to_string(xid) + " on GPU 3", &labels);
        REQUIRE(r);
        CHECK(r->event.value == xid);
        CHECK(dcgm_title(*r).rfind("Xid " + std::to_string(xid) + " on GPU 3", 0) == 0);
    }
    CHECK_FALSE(read_dcgm("XID 0 on GPU 3", &labels));
    CHECK_FALSE(read_dcgm("XID 65536 on GPU 3", &labels));
}

TEST_CASE("a GPU flapping past the sightings kept: the bundle matches the first 4096 and counts the rest as DCGM's",
          "[forensics][dcgm]") {
    // 5,000 Xids both the kernel and DCGM reported, 30 s apart. Each source keeps its first
    // 4,096 sightings (memory per finding is bounded): those are matched; the 904 DCGM ones past
    // them cannot be, and stay a DCGM finding with their count, as `jobtrail xid` counts them.
    Analyzer a;
    const auto labels = dcgm_labels("3", "00000000:3B:00.0");
    for (int64_t i = 0; i < 5000; ++i) {
        a.add("gpu01", "kmsg", kT0 + i * 30 * kS, kKernel79);
        a.add_dcgm("gpu01", kT0 + i * 30 * kS + kS, "XID 79 on GPU 3", &labels);
    }
    const auto fs = a.findings();
    REQUIRE(fs.size() == 2);
    REQUIRE(count_kind(fs, "kmsg") == 1);
    for (const auto& f : fs) {
        if (f.source == "kmsg") {
            CHECK(f.count == 5000);
            CHECK(f.dcgm);
        } else {
            CHECK(f.count == 5000 - Analyzer::kMaxSightings);
        }
    }
    // The bound is exact: the 4,097th DCGM sighting is not matched, even against a kernel line
    // beside it (memory for a finding's sightings stops at 4,096).
    Analyzer b;
    for (int64_t i = 0; i <= 4096; ++i) b.add_dcgm("gpu01", kT0 + i * 30 * kS, "XID 79 on GPU 3", &labels);
    b.add("gpu01", "kmsg", kT0 + 4096 * 30 * kS + kS, kKernel79);
    const auto gs = b.findings();
    REQUIRE(gs.size() == 2);
    for (const auto& f : gs) {
        CHECK(f.count == (f.source == "kmsg" ? 1u : 4097u));
        if (f.source == "kmsg") CHECK_FALSE(f.dcgm);
    }
}
