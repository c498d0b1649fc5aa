#include <catch2/catch.hpp>

#include "forensics/analysis.hpp"
#include "forensics/logql.hpp"
#include "forensics/report.hpp"

using namespace jobtrail::forensics;

TEST_CASE("LogQL for a job uses the shipper's labels and quotes what it embeds", "[forensics]") {
    const jobtrail::node::Schema schema;
    CHECK(prolog_epilog_query(schema, "4242") == R"({job="slurm-prolog-epilog", job_id="4242"})");
    CHECK(kernel_query(schema, "gpu\"01") == R"({job="kmsg", node="gpu\"01"})");
    CHECK(node_matcher({"a.b", "c"}) == R"(node=~"a\\.b|c")");
    CHECK(slurmd_query(schema, "n1", "77") ==
          R"({job="systemd-journal", unit="slurmd.service", node="n1"} |~ "\\b77\\b")");
    const auto qs = job_queries(schema, "77", {"n1"}, true);
    bool sm = false;
    for (const auto& q : qs) sm |= q.logql.find(R"(| slurm_job_id=~"(.*,)?77(,.*)?")") != std::string::npos;
    CHECK(sm);
    for (const auto& q : job_queries(schema, "77", {"n1"}, false))
        CHECK(q.logql.find("slurm_job_id") == std::string::npos);
}

TEST_CASE("the most likely cause is the first fatal event, whatever came before it", "[forensics]") {
    Analyzer a;
    a.add("n1", "nccl", 100, "[t] n1:1:1 [0] NCCL WARN NET/IB : Got completion with error 12");
    a.add("n2", "kmsg", 300, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.");
    a.add("n2", "kmsg", 200, "NVRM: Xid (PCI:0000:3b:00): 13, Graphics SM Warp Exception");
    a.add("n2", "kmsg", 400, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.");
    a.add("n1", "epilog", 500, "epilog status[50-health.sh] status=1 duration_ms=3 result=\"exit 1\"");
    a.add("n1", "prolog", 50, "prolog status[10-ok.sh] status=0 duration_ms=3 result=\"exit 0\"");
    a.add("n1", "prolog", 51, "prolog meta user=alice");
    const auto fs = a.findings();
    REQUIRE(fs.size() == 4);  // NCCL warn, Xid 13, Xid 79 (twice, grouped), epilog failure
    const Finding* c = a.likely_cause(fs);
    REQUIRE(c != nullptr);
    CHECK(c->node == "n2");
    CHECK(c->xid == 79);
    CHECK(c->count == 2);
    CHECK(c->ts_ns == 300);
    CHECK(c->action.find("reboot") != std::string::npos);
    CHECK(a.facts().user == "alice");
    const std::string s = a.summary_text();
    CHECK(s.find("epilog script 50-health.sh failed: exit 1") != std::string::npos);
    CHECK(s.find("(x2)") != std::string::npos);
}

TEST_CASE("report.html escapes what the logs say and fetches nothing", "[forensics]") {
    Analyzer a;
    a.add("n<1>", "nccl", 100, "[t] NCCL WARN <script>alert(1)</script>");
    a.facts().job_id = "1";
    a.facts().nodes = {"n<1>"};
    const auto fs = a.findings();
    const std::string h = render_report_html(a.facts(), fs, a.likely_cause(fs));
    CHECK(h.find("<script>") == std::string::npos);
    CHECK(h.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
    CHECK(h.find("href=") == std::string::npos);  // (the SVG namespace URI is a name, not a fetch)
    CHECK(h.find("src=") == std::string::npos);
    CHECK(h.find("<link") == std::string::npos);
}

TEST_CASE("Xid queries and the bundle's analysis match only lines the kernel starts", "[forensics][hostile]") {
    CHECK(xid_query({}) == R"({job="kmsg"} |~ "^NVRM: Xid|^nvidia-nvswitch[0-9]*: SXid")");
    for (const auto& q : job_queries("77", {"n1"}, false))
        if (q.name.find("Xid") != std::string::npos) CHECK(q.logql.find(R"(|~ "^NVRM: Xid)") != std::string::npos);
    // A binary named like an Xid that crashed: the kernel line Loki hands back.
    Analyzer an;
    an.add("n1", "kmsg", 1,
           "NVRM: Xid (PCI:[4242]: segfault at 0 ip 0000000000401000 sp 00007ffc00000000 error 4 in NVRM: Xid "
           "(PCI:0000:3b:00): 79, x[401000+1000]");
    const auto f = an.findings();
    REQUIRE(f.size() == 1);
    CHECK(f[0].kind == "segfault");
    CHECK(f[0].xid == 0);
}
