#include <re2/re2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "common/time.hpp"
#include "file_size_limit.hpp"
#include "forensics/analysis.hpp"
#include "forensics/bundle.hpp"
#include "forensics/logql.hpp"
#include "forensics/node_view.hpp"
#include "forensics/report.hpp"
#include "temp_dir.hpp"

using namespace jobtrail::forensics;

TEST_CASE("LogQL for a job uses the shipper's labels and quotes what it embeds", "[forensics]") {
    const Scope schema;
    CHECK(prolog_epilog_query(schema, "4242") == R"({job="slurm-prolog-epilog", job_id="4242"})");
    CHECK(kernel_query(schema, "gpu\"01") == R"({job="kmsg", node="gpu\"01"})");
    CHECK(node_matcher({"a.b", "c"}) == R"(node=~"a\\.b|c")");
    CHECK(slurmd_query(schema, "n1", "77") ==
          R"({job="systemd-journal", unit="slurmd.service", node="n1"} |~ "\\b77\\b")");
    const auto qs = job_queries(schema, "77", {"n1"}, true);
    bool own = false, node_wide = false;
    for (const auto& q : qs) {
        own |= q.logql == R"x({job="kmsg"} | slurm_job_id="77")x";
        node_wide |= q.logql == R"x({job="kmsg"} | attribution="node" | slurm_jobs_running=~"(.*,)?77(,.*)?")x";
    }
    CHECK(own);
    CHECK(node_wide);
    CHECK(node_jobs_query(schema, "n1") ==
          R"x({job="slurm-prolog-epilog", node="n1"} |~ "^(prolog|epilog) (meta|device|end)")x");
    for (const auto& q : job_queries(schema, "77", {"n1"}, false))
        CHECK(q.logql.find("slurm_job_id") == std::string::npos);
}

TEST_CASE("a node matcher selects exactly the job's nodes, whatever their names hold", "[forensics]") {
    // gpu[02]: the name scontrol could not expand; "a.b" and "c+" hold other regex characters.
    const std::vector<std::string> nodes = {"gpu01", "gpu[02]", "a.b", "c+", "x|y"};
    const std::string m = node_matcher(nodes);
    CHECK(m == R"(node=~"gpu01|gpu\\[02\\]|a\\.b|c\\+|x\\|y")");
    // What Loki matches: the LogQL string's value as an RE2 regex, anchored at both ends.
    std::string value;
    for (size_t i = m.find('"') + 1; i + 1 < m.size(); ++i) {
        if (m[i] == '\\') ++i;
        value += m[i];
    }
    const RE2 re(value);
    REQUIRE(re.ok());
    for (const auto& n : nodes) CHECK(RE2::FullMatch(n, re));
    for (const char* other : {"gpu0", "gpu2", "gpu[02", "gpu02", "axb", "cc", "x", "y", "gpu01x"}) {
        INFO(other);
        CHECK_FALSE(RE2::FullMatch(other, re));
    }
    CHECK(node_matcher({"gpu[02]"}) == R"(node="gpu[02]")");  // one node: an exact match, nothing quoted
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

TEST_CASE("a fabric manager line is a finding when it says error, in either case, and only then", "[forensics]") {
    Analyzer a;
    a.add("n1", "fabric-manager", 100, "[INFO] fabric manager ok");
    a.add("n1", "fabric-manager", 110,
          "[Dec 04 2026 01:00:00] [INFO] [tid 9] Successfully configured all the available GPUs");
    a.add("n2", "fabric-manager", 200, "[ERROR] [tid 9] detected NVSwitch fatal error on fabric");
    a.add("n3", "fabric-manager", 300, "request to query NVSwitch device information failed with error:-3");
    a.add("n4", "kmsg", 400, "fabric manager ERROR quoted in another source");
    const auto fs = a.findings();
    std::set<std::string> nodes;
    for (const auto& f : fs) {
        CHECK(f.kind == "fm-error");
        nodes.insert(f.node);
    }
    CHECK(nodes == std::set<std::string>{"n2", "n3"});
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

TEST_CASE(
    "report.html draws each finding in its legend's shape: kernel and DCGM circles, NCCL squares, scripts triangles",
    "[forensics]") {
    JobFacts j;
    j.job_id = "1";
    j.nodes = {"n1"};
    std::vector<Finding> fs;
    const std::vector<std::pair<std::string, std::string>> by_source = {
        {"kmsg", "circle"}, {"dcgm", "circle"}, {"nccl", "rect"}, {"epilog", "polygon"}, {"fabric-manager", "polygon"}};
    for (size_t i = 0; i < by_source.size(); ++i) {
        Finding f;
        f.ts_ns = 1'795'989'142'000'000'000 + static_cast<int64_t>(i) * 1'000'000'000;
        f.node = "n1";
        f.source = by_source[i].first;
        f.title = "finding of " + by_source[i].first;
        fs.push_back(f);
    }
    const std::string h = render_report_html(j, fs, nullptr);
    for (const auto& [source, shape] : by_source) {
        INFO(source);
        const size_t title = h.find("finding of " + source + "</title>");
        REQUIRE(title != std::string::npos);
        // The element the title is in: the last one opened before it.
        size_t open = std::string::npos;
        std::string drawn;
        for (const std::string s : {"<circle ", "<rect ", "<polygon "})
            if (const size_t at = h.rfind(s, title);
                at != std::string::npos && (open == std::string::npos || at > open)) {
                open = at;
                drawn = s.substr(1, s.size() - 2);
            }
        CHECK(drawn == shape);
    }
    CHECK(h.find("circle: kernel or DCGM event, square: NCCL, triangle: prolog/epilog or fabric manager") !=
          std::string::npos);
}

TEST_CASE("Xid queries and the bundle's analysis match only lines the kernel starts", "[forensics][hostile]") {
    CHECK(xid_query(Scope(), {}) == R"({job="kmsg"} |~ "^NVRM: Xid|^nvidia-nvswitch[0-9]*: SXid")");
    for (const auto& q : job_queries(Scope(), "77", {"n1"}, false))
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

TEST_CASE("a value from Loki or a user's directory becomes one clean file name, distinct ones stay distinct",
          "[forensics]") {
    CHECK(path_component("gpu01") == "gpu01");
    CHECK(path_component("0.gpu01.1000.log") == "0.gpu01.1000.log");
    CHECK(path_component("..") == "%2E.");
    CHECK(path_component(".") == "%2E");
    CHECK(path_component("") == "~empty");
    CHECK(path_component("../../x/ESCAPED") == "%2E.%2F..%2Fx%2FESCAPED");
    CHECK(path_component("/etc/passwd") == "%2Fetc%2Fpasswd");
    CHECK(path_component("a\nb\xff") == "a%0Ab%FF");
    // Escaping is one-to-one: the escaped form of one value is not another value's.
    CHECK(path_component("a/b") != path_component("a_b"));
    CHECK(path_component("a%2Fb") != path_component("a/b"));
    const std::string long_a(300, 'a'), long_b = std::string(299, 'a') + "b";
    const std::string la = path_component(long_a), lb = path_component(long_b);
    CHECK(la.size() <= 128);
    CHECK(la != lb);
    CHECK(la.find('~') != std::string::npos);
    // Cut between escapes, never inside one, wherever the escapes fall against the cut.
    for (const std::string lead : {"", "a", "aa"}) {
        INFO("'" << lead << "' then 200 slashes");
        const std::string cut = path_component(lead + std::string(200, '/'));
        CHECK(cut.size() <= 128);
        const std::string kept = cut.substr(0, cut.find('~'));
        CHECK(kept.size() <= 96);
        CHECK((kept.size() - lead.size()) % 3 == 0);
    }
    CHECK(jobtrail::node::valid_job_id("4242"));
    for (const char* bad : {"", "42_1", "42+1", "-1", "4 2", "../42", "123456789012345678901"})
        CHECK_FALSE(jobtrail::node::valid_job_id(bad));
}

namespace {

// Job 77's local logs under `dir`/logs: its prolog log naming node n1, and an empty NCCL directory.
void job_logs(const std::string& dir) {
    std::filesystem::create_directories(dir + "/logs/prolog");
    std::filesystem::create_directories(dir + "/logs/nccl/77");
    std::ofstream(dir + "/logs/prolog/77.log") << "2026-11-29T21:52:01.000000000Z meta node=n1\n";
}

// Job 77's logs with NCCL files of `files` x `lines` lines of `width` characters, random or one
// letter, the files one after another in time.
void nccl_files(const std::string& dir, int files, int lines, size_t width, bool random) {
    job_logs(dir);
    std::mt19937 rng(29);
    for (int k = 0; k < files; ++k) {
        std::ofstream f(dir + "/logs/nccl/77/" + std::to_string(k) + ".n1.1.log");
        for (int i = 0; i < lines; ++i) {
            std::string text(width, 'a');
            if (random)
                for (char& c : text) c = static_cast<char>('!' + rng() % 94);
            f << "[2026-11-29T21:5" << 3 + k << ":" << std::setw(2) << std::setfill('0') << i % 60
              << ".000000+0000] n1:1:1 [0] NCCL INFO " << text << "\n";
        }
    }
}

BundleOptions local_bundle(const std::string& dir, const std::string& out) {
    BundleOptions o;
    o.job_id = "77";
    o.local = true;
    o.log_dir = dir + "/logs";
    o.out_dir = dir + "/" + out;
    std::filesystem::create_directories(o.out_dir);
    return o;
}

// The bundle extracted into `into` (made here) by tar, as an operator would: its top directory.
std::filesystem::path extract(const std::string& archive, const std::string& into) {
    REQUIRE(std::system(("mkdir " + into + " && tar --zstd -xf " + archive + " -C " + into).c_str()) == 0);
    return std::filesystem::directory_iterator(into)->path();
}

// Sizes of what a bundle holds, by name (the largest of each name), extracted into `into`.
std::map<std::string, uintmax_t> member_sizes(const std::string& archive, const std::string& into) {
    namespace fs = std::filesystem;
    extract(archive, into);
    std::map<std::string, uintmax_t> out;
    for (const auto& e : fs::recursive_directory_iterator(into))
        if (e.is_regular_file()) out[e.path().filename()] = std::max(out[e.path().filename()], e.file_size());
    return out;
}

// make_bundle with the process's files limited to `limit` bytes, as a full disk or a quota
// would stop it; a write that fails while staging throws, and `jobtrail` says it as an error.
BundleResult bundle_within(const BundleOptions& o, rlim_t limit) {
    const jobtrail::test::FileSizeLimit full(limit);
    BundleResult r;
    try {
        r = make_bundle(o);
    } catch (const std::exception& e) {
        r.exit_code = kExitError;
        r.error = e.what();
    }
    return r;
}

}  // namespace

TEST_CASE("a local file is read up to the cap, then cut with a marker the manifest reports", "[forensics]") {
    namespace fs = std::filesystem;
    const jobtrail::test::TempDir tmp("cap");
    const std::string& dir = tmp.path();
    job_logs(dir);
    {
        std::ofstream big(dir + "/logs/nccl/77/big.log");
        for (int i = 0; i < 10'000; ++i)
            big << "[2026-11-29T21:52:20.000000+0000] n1:1:1 [0] NCCL INFO line " << i << "\n";
    }
    BundleOptions o = local_bundle(dir, "out");
    o.max_file_bytes = 4096;
    const auto r = make_bundle(o);
    REQUIRE(r.exit_code == kExitOk);
    const fs::path top = extract(r.archive, dir + "/x");
    std::ifstream in(top / "nccl/n1/big.log");
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    REQUIRE(lines.size() >= 2);
    CHECK(lines.size() < 4096 / 60 + 2);  // 66-byte lines: what fits in 4 KiB, and the marker
    CHECK(lines.back().find("[jobtrail] cut here: the file is longer than 4096 bytes") != std::string::npos);
    // Whole lines up to the cut (the one it fell in comes in part), in order.
    for (size_t i = 0; i + 2 < lines.size(); ++i) CHECK(lines[i].ends_with("NCCL INFO line " + std::to_string(i)));
    std::ifstream mf(top / "manifest.json");
    const std::string manifest((std::istreambuf_iterator<char>(mf)), std::istreambuf_iterator<char>());
    CHECK(manifest.find(R"("name": "local NCCL")") != std::string::npos);
    CHECK(manifest.find(R"("truncated": true)") != std::string::npos);
}

TEST_CASE("a job's local NCCL files are read up to the bundle's file and byte caps, the rest named as refused",
          "[forensics][hostile]") {
    // A user decides how many NCCL files their job leaves and how long they are: the bundle takes
    // the first files by name up to both caps, exactly, and says which it left and why.
    namespace fs = std::filesystem;
    const jobtrail::test::TempDir tmp("caps");
    const std::string& dir = tmp.path();
    job_logs(dir);
    const std::string line = "[2026-11-29T21:52:20.000000+0000] n1:1:1 [0] NCCL INFO eighty bytes with an end\n";
    REQUIRE(line.size() == 80);
    for (int k = 0; k < 5; ++k) {
        std::ofstream f(dir + "/logs/nccl/77/" + std::to_string(k) + ".n1.1.log");
        for (int i = 0; i < 2; ++i) f << line;
    }
    auto bundle = [&](size_t files, uint64_t bytes) {
        BundleOptions o = local_bundle(dir, "out" + std::to_string(files) + "-" + std::to_string(bytes));
        o.max_local_files = files;
        o.max_local_bytes = bytes;
        const auto r = make_bundle(o);
        REQUIRE(r.exit_code == kExitOk);
        const fs::path top = extract(r.archive, o.out_dir + "/x");
        std::map<std::string, std::string> got;
        for (const auto& e : fs::directory_iterator(top / "nccl/n1")) {
            std::ifstream in(e.path());
            got[e.path().filename()] = std::string(std::istreambuf_iterator<char>(in), {});
        }
        std::ifstream mf(top / "manifest.json");
        const auto m = nlohmann::json::parse(mf);
        std::map<std::string, std::string> refused;
        for (const auto& e : m["refused"]) refused[e["path"]] = e["reason"];
        return std::make_pair(got, refused);
    };
    // As many files as the cap: all read, none refused.
    auto [five, none] = bundle(5, 1 << 20);
    CHECK(five.size() == 5);
    CHECK(none.empty());
    // Three files: the first three by name; the others refused.
    auto [three, two] = bundle(3, 1 << 20);
    CHECK(three.size() == 3);
    CHECK(three.count("0.n1.1.log"));
    CHECK(three.count("2.n1.1.log"));
    CHECK(two ==
          std::map<std::string, std::string>{{"3.n1.1.log", "too_many_files"}, {"4.n1.1.log", "too_many_files"}});
    // 400 bytes of NCCL output: two whole files (320), the third cut after its first line (the
    // 80 bytes left), with the marker; the next is past the bytes and refused.
    auto [cut, past] = bundle(100, 400);
    CHECK(cut.size() == 3);
    const std::string staged = "2026-11-29T21:52:20.000000000Z " + line;  // each with its time first
    CHECK(cut["1.n1.1.log"] == staged + staged);
    CHECK(cut["2.n1.1.log"].starts_with(staged + "2026-11-29T21:52:20.000000000Z [jobtrail] cut here"));
    CHECK(cut["2.n1.1.log"].find("[jobtrail] cut here: the file is longer than 80 bytes") != std::string::npos);
    CHECK(past ==
          std::map<std::string, std::string>{{"3.n1.1.log", "too_many_files"}, {"4.n1.1.log", "too_many_files"}});
}

TEST_CASE("an event in the margin before the job ranks after the job's own events, and says so", "[forensics]") {
    // The job's GPU had an ECC error under an earlier job; during this one it fell off the bus.
    Analyzer a;
    a.facts().job_start_ns = 1000;
    a.facts().job_end_ns = 2000;
    a.add("n1", "prolog", 1000, "prolog device kind=gpu index=1 bdf=0000:2a:00.0");
    a.add("n1", "kmsg", 300, "NVRM: Xid (PCI:0000:2a:00): 79, pid=1, GPU has fallen off the bus.");
    a.add("n1", "kmsg", 400, "NVRM: Xid (PCI:0000:2a:00): 48, pid=1, DBE (double bit error) ECC Error");
    a.add("n1", "kmsg", 1500, "NVRM: Xid (PCI:0000:2a:00): 79, pid=1, GPU has fallen off the bus.");
    a.add("n1", "kmsg", 2500, "NVRM: Xid (PCI:0000:2a:00): 94, pid=1, Contained ECC error");
    const auto fs = a.findings();
    const Finding* c = a.likely_cause(fs);
    REQUIRE(c);
    CHECK(c->xid == 79);
    CHECK(c->ts_ns == 1500);  // not folded into the earlier one's time
    REQUIRE(fs.size() == 4);
    CHECK(fs[0].when == -1);
    CHECK(fs[0].title.find("(before the job started)") != std::string::npos);
    CHECK(fs[1].when == -1);
    CHECK(fs[2].when == 0);
    CHECK(fs[2].title.find("before") == std::string::npos);
    CHECK(fs[3].title.find("(after the job ended)") != std::string::npos);
    // With nothing during the job, the margin's own-GPU event is still named.
    Analyzer b;
    b.facts().job_start_ns = 1000;
    b.facts().job_end_ns = 2000;
    b.add("n1", "prolog", 1000, "prolog device kind=gpu index=1 bdf=0000:2a:00.0");
    b.add("n1", "kmsg", 400, "NVRM: Xid (PCI:0000:2a:00): 48, pid=1, DBE (double bit error) ECC Error");
    const auto gs = b.findings();
    REQUIRE(b.likely_cause(gs));
    CHECK(b.likely_cause(gs)->xid == 48);
    // A fatal event before the job outranks a warning during it: the GPU was already gone.
    Analyzer pre;
    pre.facts().job_start_ns = 1000;
    pre.facts().job_end_ns = 2000;
    pre.add("n1", "prolog", 1000, "prolog device kind=gpu index=1 bdf=0000:2a:00.0");
    pre.add("n1", "kmsg", 400, "NVRM: Xid (PCI:0000:2a:00): 79, pid=1, GPU has fallen off the bus.");
    pre.add("n1", "nccl", 1500,
            "[2026-11-29T21:52:22.1+0000] n1:1:1 [0] transport/net_ib.cc:1 NCCL WARN NET/IB : error");
    const auto hs = pre.findings();
    REQUIRE(pre.likely_cause(hs));
    CHECK(pre.likely_cause(hs)->xid == 79);
    // From a node's own job logs (no window known): the prolog's kernel context is before the job.
    Analyzer local;
    local.add("n1", "prolog", 1000, "prolog device kind=gpu index=1 bdf=0000:2a:00.0");
    local.add("n1", "kmsg", 300, "NVRM: Xid (PCI:0000:2a:00): 79, pid=1, GPU has fallen off the bus.", -1);
    local.add("n1", "kmsg", 1500, "NVRM: Xid (PCI:0000:2a:00): 79, pid=1, GPU has fallen off the bus.");
    const auto ls = local.findings();
    REQUIRE(ls.size() == 2);
    CHECK(ls[0].title.find("(before the job started)") != std::string::npos);
    REQUIRE(local.likely_cause(ls));
    CHECK(local.likely_cause(ls)->ts_ns == 1500);
}

TEST_CASE("the most likely cause is an event on the job's own GPU, not on its neighbour's", "[forensics]") {
    Analyzer a;
    a.add("n1", "prolog", 100, "prolog device kind=gpu index=1 bdf=0000:2a:00.0 serial=1652922012346");
    // The neighbour's GPU fails first, then the job's own.
    a.add("n1", "kmsg", 200, "NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.");
    a.add("n1", "kmsg", 300, "NVRM: Xid (PCI:0000:2a:00): 79, pid=1, GPU has fallen off the bus.");
    const auto fs = a.findings();
    const Finding* c = a.likely_cause(fs);
    REQUIRE(c);
    CHECK(c->ts_ns == 300);
    CHECK(c->own_device == 1);
    CHECK(c->title.find("on this job's GPU 1 (0000:2a:00.0, serial 1652922012346)") != std::string::npos);
    CHECK(fs[0].own_device == 0);
    CHECK(fs[0].title.find("not this job's device") != std::string::npos);
    // Without the job's devices (an older prolog, another node) the first fatal event stands.
    Analyzer b;
    b.add("n1", "kmsg", 200, "NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.");
    b.add("n1", "kmsg", 300, "NVRM: Xid (PCI:0000:2a:00): 79, pid=1, GPU has fallen off the bus.");
    const auto gs = b.findings();
    CHECK(b.likely_cause(gs)->ts_ns == 200);
    CHECK(gs[0].own_device == -1);
    // The job's own Xid 13 (an error) outranks a neighbour's fatal Xid 79.
    Analyzer c2;
    c2.add("n1", "prolog", 100, "prolog device kind=gpu index=1 bdf=0000:2a:00.0");
    c2.add("n1", "kmsg", 200, "NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.");
    c2.add("n1", "kmsg", 300, "NVRM: Xid (PCI:0000:2a:00): 13, pid=1, Graphics Exception");
    const auto hs = c2.findings();
    CHECK(c2.likely_cause(hs)->ts_ns == 300);
    // Partly unresolved devices: an unmatched GPU may be the job's own, so it is not demoted.
    Analyzer d;
    d.add("n1", "prolog", 100, "prolog device kind=gpu index=1 bdf=0000:2a:00.0");
    d.add("n1", "prolog", 100, "prolog device[unresolved] note=\"no device file known for Slurm GPU index 1\"");
    d.add("n1", "kmsg", 200, "NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.");
    CHECK(d.findings()[0].own_device == -1);
    // GPU 0 and GPU 10 are the job's like any other: their digits are read, a 0 included.
    for (const std::string index : {"0", "10"}) {
        INFO("Slurm's GPU index " << index);
        Analyzer z;
        z.add("n1", "prolog", 100, "prolog device kind=gpu index=" + index + " bdf=0000:18:00.0");
        z.add("n1", "kmsg", 200, "NVRM: Xid (PCI:0000:2a:00): 79, pid=1, GPU has fallen off the bus.");
        z.add("n1", "kmsg", 300, "NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.");
        const auto zs = z.findings();
        REQUIRE(z.likely_cause(zs));
        CHECK(z.likely_cause(zs)->ts_ns == 300);
        CHECK(z.likely_cause(zs)->title.find("on this job's GPU " + index + " (0000:18:00.0)") != std::string::npos);
    }
}

TEST_CASE("jobtrail node: jobs with their GPUs, each kernel event with the job it hit", "[forensics]") {
    NodeView v("n1");
    v.add_job_line("1", "prolog", 100, "meta", "", "user=alice");
    v.add_job_line("1", "prolog", 101, "device", "", "kind=gpu index=0 bdf=0000:18:00.0 serial=S0");
    v.add_job_line("2", "prolog", 100, "device", "", "kind=gpu index=1 bdf=0000:2a:00.0");
    v.add_job_line("3", "prolog", 100, "meta", "", "uid=0");
    v.add_job_line("3", "prolog", 100, "device", "unresolved",
                   "note=\"the driver lists no GPU with minor 2\" attribution=node-wide");
    v.add_job_line("1", "epilog", 900, "end", "", "status=0 duration_ms=1");
    v.add_kernel(500, "NVRM: Xid (PCI:0000:2a:00): 79, pid=1, GPU has fallen off the bus.");
    v.add_kernel(600,
                 "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/slurm/uid_0/job_3,task_memcg=/slurm/uid_0/job_3/"
                 "step_0,task=x,pid=5,uid=0");
    v.add_kernel(601, "Memory cgroup out of memory: Killed process 5 (x) total-vm:1kB");
    v.add_kernel(700, "mlx5_core 0000:5e:00.0: health compromised - reached miss count");
    v.add_kernel(950, "NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.");
    REQUIRE(v.events().size() == 4);
    CHECK(v.events()[0].jobs == std::vector<std::string>{"2"});
    CHECK(v.events()[0].basis == "device");
    CHECK(v.events()[1].jobs == std::vector<std::string>{"3"});
    CHECK(v.events()[1].basis == "memcg");
    CHECK(v.events()[2].jobs == std::vector<std::string>{"1", "2", "3"});
    // After job 1's epilog its GPU is nobody's: node-wide, among the jobs still running.
    CHECK(v.events()[3].basis == "node");
    CHECK(v.events()[3].jobs == std::vector<std::string>{"2", "3"});
    const std::string t = v.text(0, 1000, "test");
    CHECK(t.find("1 user=alice") != std::string::npos);
    CHECK(t.find("    GPU 0 (0000:18:00.0, serial S0)") != std::string::npos);
    CHECK(t.find("hit job 2: its GPU 1 (0000:2a:00.0)") != std::string::npos);
    CHECK(t.find("devices: the driver lists no GPU with minor 2") != std::string::npos);
    CHECK(t.find("JOBS NOT HIT\n------------\n1: no event on its devices or memory cgroup (1 node-wide)") !=
          std::string::npos);
    const auto j = v.json(0, 1000, "test");
    CHECK(j["jobs"][0]["hit"] == false);
    CHECK(j["jobs"][1]["hit"] == true);
    CHECK(j["events"][0]["device"] == "GPU 1 (0000:2a:00.0)");
}

namespace {

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string command_output(const std::string& cmd) {
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[65536];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    REQUIRE(::pclose(p) == 0);
    return out;
}

// A directory listing with each entry's type and, for a link, its target.
std::map<std::string, std::string> tree_of(const std::string& dir) {
    namespace fs = std::filesystem;
    std::map<std::string, std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
        const std::string rel = e.path().string().substr(dir.size());
        out[rel] = e.is_symlink() ? "-> " + fs::read_symlink(e.path()).string() : e.is_directory() ? "dir" : "file";
    }
    return out;
}

}  // namespace

TEST_CASE("a bundle into a directory others can write never writes or reads through what they planted there",
          "[forensics][hostile]") {
    namespace fs = std::filesystem;
    const jobtrail::test::TempDir d;
    // Root-only files outside the output directory, the targets of the user's links.
    const std::string secrets = d.path() + "/root-only";
    REQUIRE(::mkdir(secrets.c_str(), 0700) == 0);
    const std::string secret = secrets + "/shadow", archive_target = secrets + "/archive-target";
    const std::string secret_text = "root:TOPSECRET-SHADOW:19000:0:99999:7:::\n";
    const std::string target_text = "TOPSECRET-ARCHIVE-TARGET\n";
    std::ofstream(secret) << secret_text;
    std::ofstream(archive_target) << target_text;
    ::chmod(secret.c_str(), 0600);
    ::chmod(archive_target.c_str(), 0600);

    fs::create_directories(d.path() + "/logs/prolog");
    fs::create_directories(d.path() + "/logs/epilog");
    std::ofstream(d.path() + "/logs/prolog/77.log")
        << "2026-11-29T21:52:01.000000000Z meta node=n1\n"
           "2026-11-29T21:52:02.000000000Z status[10-check.sh] status=0 duration_ms=3 result=\"exit 0\"\n";
    std::ofstream(d.path() + "/logs/epilog/77.log") << "2026-11-29T21:52:31.000000000Z end status=0 duration_ms=9\n";

    // The output directory as its user left it: the staging directory of this pid and of its
    // neighbours, full of links to the secret, and links at the archive's names of the next
    // minute (the name is the cluster, the job and the second it starts).
    const std::string out = d.path() + "/out";
    REQUIRE(::mkdir(out.c_str(), 0777) == 0);
    ::chmod(out.c_str(), 01777);  // /tmp's way: anyone may write it, only the owner rename there
    const std::vector<std::string> planted_files = {"timeline.txt",      "summary.txt",         "report.html",
                                                    "manifest.json",     "nodes/n1/prolog.log", "nodes/n1/epilog.log",
                                                    "nodes/n1/kmsg.log", "nccl/n1/x.log"};
    for (int pid = static_cast<int>(::getpid()) - 20; pid <= static_cast<int>(::getpid()) + 20; ++pid) {
        if (pid <= 0) continue;
        const std::string s = out + "/.jobtrail-job77-" + std::to_string(pid) + ".partial";
        for (const auto& f : planted_files) {
            fs::create_directories(fs::path(s + "/" + f).parent_path());
            fs::create_symlink(secret, s + "/" + f);
        }
    }
    const time_t now = ::time(nullptr);
    for (time_t t = now - 2; t <= now + 60; ++t) {
        struct tm tm {};
        ::gmtime_r(&t, &tm);
        char stamp[32];
        std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
        const std::string name = out + "/lab-job77-" + stamp + ".tar.zst";
        fs::create_symlink(archive_target, name);
        fs::create_symlink(secret, name + ".sha256");
    }
    // Run as root (as in CI): the directory and everything in it are a user's, as they would be.
    if (::geteuid() == 0)
        for (const auto& [rel, what] : tree_of(out)) REQUIRE(::lchown((out + rel).c_str(), 65534, 65534) == 0);
    const auto planted = tree_of(out);

    BundleOptions o;
    o.job_id = "77";
    o.local = true;
    o.log_dir = d.path() + "/logs";
    o.out_dir = out;
    o.cluster = "lab";
    const auto r = make_bundle(o);
    INFO(r.error);
    CHECK(r.exit_code == kExitOk);
    CHECK(slurp(secret) == secret_text);
    CHECK(slurp(archive_target) == target_text);

    REQUIRE(!r.archive.empty());
    struct stat sb {};
    REQUIRE(::lstat(r.archive.c_str(), &sb) == 0);
    CHECK(S_ISREG(sb.st_mode));
    CHECK((sb.st_mode & 07777) == 0600);  // root's logs: for whoever root hands the archive to
    REQUIRE(::lstat((r.archive + ".sha256").c_str(), &sb) == 0);
    CHECK(S_ISREG(sb.st_mode));
    const std::string archive_file = fs::path(r.archive).filename().string();
    CHECK(slurp(r.archive + ".sha256") == sha256_file(r.archive) + "  " + archive_file + "\n");

    // Neither secret is in any member, every member is the job's and as narrow as the archive.
    const std::string tar = command_output("zstd -dc < '" + r.archive + "'");  // whatever is at the name
    CHECK(tar.find("TOPSECRET") == std::string::npos);
    CHECK(tar.find("meta node=n1") != std::string::npos);
    const std::string listing = command_output("zstd -dc < '" + r.archive + "' | tar -tvf -");
    size_t members = 0;
    for (size_t at = 0, nl; (nl = listing.find('\n', at)) != std::string::npos; at = nl + 1, ++members) {
        INFO(listing.substr(at, nl - at));
        CHECK(listing.compare(at, 11, "-rw------- ") == 0);
    }
    CHECK(members >= 5);  // manifest, summary, timeline, report, the node's logs

    // What the user planted is as they left it: the archive took another name than theirs, and
    // no staging directory is left.
    CHECK(planted.count("/" + archive_file) == 0);
    CHECK(archive_file.ends_with("-2.tar.zst"));
    auto after = tree_of(out);
    CHECK(after.erase("/" + archive_file) == 1);
    CHECK(after.erase("/" + archive_file + ".sha256") == 1);
    CHECK(after == planted);
}

TEST_CASE("an output directory that cannot hold a bundle is an error that names it", "[forensics]") {
    const jobtrail::test::TempDir d;
    std::ofstream(d.path() + "/file") << "x";
    BundleOptions o;
    o.job_id = "77";
    o.local = true;
    o.log_dir = d.path() + "/logs";
    o.out_dir = d.path() + "/file";
    const auto r = make_bundle(o);
    CHECK(r.exit_code == kExitError);
    CHECK(r.archive.empty());
    CHECK(r.error.find(d.path() + "/file") != std::string::npos);
    CHECK(r.error.find("Not a directory") != std::string::npos);
}

TEST_CASE("an archive the output directory cannot take is an error, and no archive is named or left", "[forensics]") {
    // A job whose archive is larger than any file in it (random text, the NCCL files one after
    // another in time, so the archive's copies lie farther apart than zstd looks back), bundled
    // where files may grow to a size between the two.
    namespace fs = std::filesystem;
    const jobtrail::test::TempDir tmp("fsize");
    const std::string& dir = tmp.path();
    nccl_files(dir, 3, 500, 2000, true);
    const auto whole = make_bundle(local_bundle(dir, "whole"));
    REQUIRE(whole.exit_code == kExitOk);
    const auto archive_bytes = fs::file_size(whole.archive);
    uintmax_t largest = 0;
    for (const auto& [name, size] : member_sizes(whole.archive, dir + "/x")) largest = std::max(largest, size);
    REQUIRE(largest * 5 / 4 < archive_bytes);

    const auto o = local_bundle(dir, "out");
    const auto r = bundle_within(o, (largest + archive_bytes) / 2);
    INFO(r.error);
    CHECK(r.exit_code == kExitError);
    CHECK(r.archive.empty());  // `jobtrail bundle` would print it as the bundle's path
    CHECK(r.error.find("File too large") != std::string::npos);
    CHECK(r.error.find(o.out_dir) != std::string::npos);
    // Nothing half written is left, nor the names claimed for it, nor the staging directory.
    CHECK(fs::is_empty(o.out_dir));
}

TEST_CASE("a timeline the disk cuts in its last bytes fails the bundle, never an archive with it cut short",
          "[forensics]") {
    // Lines that compress well: the archive is small, the timeline the largest file; the limit
    // lets every write but the timeline's last buffered bytes through.
    namespace fs = std::filesystem;
    const jobtrail::test::TempDir tmp("fsize");
    const std::string& dir = tmp.path();
    nccl_files(dir, 1, 300, 200, false);
    const auto whole = make_bundle(local_bundle(dir, "whole"));
    REQUIRE(whole.exit_code == kExitOk);
    auto sizes = member_sizes(whole.archive, dir + "/x");
    const uintmax_t timeline = sizes["timeline.txt"];
    sizes.erase("timeline.txt");
    for (const auto& [name, size] : sizes) REQUIRE(size < timeline - 1);
    REQUIRE(fs::file_size(whole.archive) < timeline - 1);
    REQUIRE(timeline % BUFSIZ != 0);

    const auto o = local_bundle(dir, "out");
    const auto r = bundle_within(o, timeline - 1);
    INFO(r.error);
    CHECK(r.exit_code == kExitError);
    CHECK(r.archive.empty());
    CHECK(r.error.find("timeline.txt") != std::string::npos);
    CHECK(r.error.find("File too large") != std::string::npos);
    CHECK(fs::is_empty(o.out_dir));
}

TEST_CASE("jobtrail node: an OOM kill in a cgroup a user named after another's job is node-wide, and says why",
          "[forensics]") {
    NodeView v("n1");
    v.add_job_line("4242", "prolog", 100, "meta", "", "user=alice");
    v.add_job_line("4242", "prolog", 100, "meta", "", "uid=1000");
    v.add_kernel(500,
                 "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
                 "oom_memcg=/user.slice/user-1001.slice/user@1001.service/job_4242,"
                 "task_memcg=/user.slice/user-1001.slice/user@1001.service/job_4242,task=eat,pid=7,uid=1001");
    v.add_kernel(501, "Memory cgroup out of memory: Killed process 7 (eat) total-vm:1kB");
    // Slurm's cgroup of the job, but a task of another user: node-wide too.
    v.add_kernel(600,
                 "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
                 "oom_memcg=/system.slice/slurmstepd.scope/job_4242,task_memcg=/system.slice/slurmstepd.scope/"
                 "job_4242/step_0/user/task_0,task=eat,pid=8,uid=1001");
    v.add_kernel(601, "Memory cgroup out of memory: Killed process 8 (eat) total-vm:1kB");
    REQUIRE(v.events().size() == 2);
    CHECK(v.events()[0].basis == "node");
    CHECK(v.events()[1].basis == "node");
    const std::string t = v.text(0, 1000, "test");
    CHECK(t.find("its memory cgroup\n") == std::string::npos);
    CHECK(t.find("node-wide: jobs 4242 (not attributed: memory cgroup "
                 "/user.slice/user-1001.slice/user@1001.service/job_4242 is not under Slurm's cgroup root") !=
          std::string::npos);
    CHECK(t.find("node-wide: jobs 4242 (not attributed: the kernel's uid=1001 is not job 4242's user (uid 1000))") !=
          std::string::npos);
}

TEST_CASE("the bundle summary prints what Loki returned escaped, never raw to the terminal", "[forensics]") {
    // Lines and labels anyone who can write a job log or push to Loki may set.
    Analyzer a;
    a.add("n\x1b[2J1", "nccl", 100, "[t] n1:1:1 [0] NCCL WARN \x1b]0;owned\x07 Got completion with error 12");
    a.add("n\x1b[2J1", "prolog", 51, "prolog meta user=al\x1b[8mice partition=gp\x1b[8mu cluster=c\x1b[8m1");
    a.add("n\x1b[2J1", "epilog", 500, "epilog status[50-health.sh] status=1\x1b[8m duration_ms=3 result=\"exit 1\"");
    const std::string s = a.summary_text();
    CHECK(s.find('\x1b') == std::string::npos);
    CHECK(s.find('\x07') == std::string::npos);
    CHECK(s.find("NCCL WARN \\x1b]0;owned\\x07 Got completion") != std::string::npos);
    CHECK(s.find("al\\x1b[8mice") != std::string::npos);
    CHECK(s.find("n\\x1b[2J1") != std::string::npos);
}

TEST_CASE("jobtrail node: the first kMaxJobs jobs are listed, a job past them is not", "[forensics]") {
    NodeView v("n1");
    for (size_t i = 0; i < NodeView::kMaxJobs; ++i)
        v.add_job_line(std::to_string(1000 + i), "prolog", 100, "meta", "", "user=alice");
    REQUIRE(v.jobs().size() == NodeView::kMaxJobs);
    const std::string last = std::to_string(1000 + NodeView::kMaxJobs - 1),
                      past = std::to_string(1000 + NodeView::kMaxJobs);
    CHECK(v.jobs().count(last) == 1);
    v.add_job_line(past, "prolog", 100, "meta", "", "user=bob");
    CHECK(v.jobs().size() == NodeView::kMaxJobs);
    CHECK(v.jobs().count(past) == 0);
    // A job already listed still takes its lines.
    v.add_job_line(last, "epilog", 900, "end", "", "status=0 duration_ms=1");
    CHECK(v.jobs().at(last).end_ns == 900);
}

TEST_CASE("jobtrail node: the newest kMaxEvents events are listed, one more drops the oldest and is counted",
          "[forensics]") {
    NodeView v("n1");
    const auto xid = [&](int64_t ts) {
        v.add_kernel(ts, "NVRM: Xid (PCI:0000:2a:00): 79, pid=1, GPU has fallen off the bus.");
    };
    for (size_t i = 0; i < NodeView::kMaxEvents; ++i) xid(1000 + static_cast<int64_t>(i));
    REQUIRE(v.events().size() == NodeView::kMaxEvents);
    CHECK(v.events().front().ts_ns == 1000);
    CHECK(v.text(0, 1'000'000, "test").find("more events not listed") == std::string::npos);
    xid(1000 + static_cast<int64_t>(NodeView::kMaxEvents));
    REQUIRE(v.events().size() == NodeView::kMaxEvents);
    CHECK(v.events().front().ts_ns == 1001);
    CHECK(v.events().back().ts_ns == 1000 + static_cast<int64_t>(NodeView::kMaxEvents));
    CHECK(v.text(0, 1'000'000, "test").find("(1 more events not listed: older ones)") != std::string::npos);
}

TEST_CASE("jobtrail node: a job starts at its earliest prolog line and ends at its epilog's end line", "[forensics]") {
    NodeView v("n1");
    v.add_job_line("5", "prolog", 200, "meta", "", "user=alice");
    v.add_job_line("5", "prolog", 100, "meta", "", "partition=gpu");
    v.add_job_line("5", "prolog", 300, "meta", "", "cluster=c1");
    v.add_job_line("5", "epilog", 50, "meta", "", "user=alice");  // an epilog line is no start
    v.add_job_line("5", "epilog", 900, "end", "", "status=0 duration_ms=1");
    v.add_job_line("5", "epilog", 950, "status", "99-last.sh", "status=0 duration_ms=1");  // no end
    v.add_job_line("5", "prolog", 960, "end", "", "status=0 duration_ms=1");               // the prolog's end
    const NodeJob& j = v.jobs().at("5");
    CHECK(j.start_ns == 100);
    CHECK(j.end_ns == 900);
    // Only an epilog: no start known, and said so.
    v.add_job_line("6", "epilog", 900, "end", "", "status=0 duration_ms=1");
    CHECK(v.jobs().at("6").start_ns == 0);
    const std::string t = v.text(0, 1000, "test");
    CHECK(t.find("\n6 ? .. " + jobtrail::format_rfc3339_ns(900) + "\n") != std::string::npos);
    CHECK(v.json(0, 1000, "test")["jobs"][1]["start"] == "");
}

TEST_CASE("jobtrail node: a uid of up to 10 digits is the job's user, a longer one or other text is not",
          "[forensics]") {
    NodeView v("n1");
    v.add_job_line("1", "prolog", 100, "meta", "", "uid=4294967294");
    v.add_job_line("2", "prolog", 100, "meta", "", "uid=42949672940");
    v.add_job_line("3", "prolog", 100, "meta", "", "uid=10x0");
    CHECK(v.jobs().at("1").uid == "4294967294");
    CHECK(v.jobs().at("2").uid.empty());
    CHECK(v.jobs().at("3").uid.empty());
}

TEST_CASE("jobtrail node: a job's first 64 GPUs are listed once each, by an index of up to 6 digits", "[forensics]") {
    NodeView v("n1");
    char bdf[32];
    for (int i = 1; i <= 65; ++i) {
        std::snprintf(bdf, sizeof bdf, "0000:%02x:00.0", i);
        v.add_job_line("1", "prolog", 100, "device", "", "kind=gpu index=" + std::to_string(i) + " bdf=" + bdf);
        if (i == 1)  // the same GPU again
            v.add_job_line("1", "prolog", 100, "device", "", "kind=gpu index=1 bdf=0000:01:00.0");
    }
    const auto& devs = v.jobs().at("1").devices;
    REQUIRE(devs.size() == 64);
    CHECK(devs.front().bdf == "0000:01:00.0");
    CHECK(devs[1].bdf == "0000:02:00.0");
    CHECK(devs.back().bdf == "0000:40:00.0");
    v.add_job_line("2", "prolog", 100, "device", "", "kind=gpu index=999999 bdf=0000:18:00.0");
    v.add_job_line("2", "prolog", 100, "device", "", "kind=gpu index=1000000 bdf=0000:2a:00.0");
    REQUIRE(v.jobs().at("2").devices.size() == 1);
    CHECK(v.jobs().at("2").devices[0].index == 999999);
}

TEST_CASE("jobtrail node: an event while no job runs is node-wide with no job, and no job is left unhit",
          "[forensics]") {
    NodeView v("n1");
    v.add_kernel(500, "NVRM: Xid (PCI:0000:2a:00): 79, pid=1, GPU has fallen off the bus.");
    const std::string t = v.text(0, 1000, "test");
    CHECK(t.find("no job ran here in the window (no prolog or epilog records)\n") != std::string::npos);
    CHECK(t.find("\n    node-wide, no job running (0000:2a:00 is no running job's device)\n") != std::string::npos);
    CHECK(t.find("JOBS NOT HIT\n------------\nnone\n") != std::string::npos);
    // Every job hit on its own GPU: none left either.
    NodeView h("n1");
    h.add_job_line("1", "prolog", 100, "device", "", "kind=gpu index=1 bdf=0000:2a:00.0");
    h.add_kernel(500, "NVRM: Xid (PCI:0000:2a:00): 79, pid=1, GPU has fallen off the bus.");
    CHECK(h.text(0, 1000, "test").find("JOBS NOT HIT\n------------\nnone\n") != std::string::npos);
}

TEST_CASE("an event at the job's first or last nanosecond is the job's own, one before or after is in its margin",
          "[forensics]") {
    Analyzer a;
    a.facts().job_start_ns = 1000;
    a.facts().job_end_ns = 2000;
    a.add("n1", "kmsg", 999, "NVRM: Xid (PCI:0000:2a:00): 13, pid=1, Graphics Exception");
    a.add("n1", "kmsg", 1000, "NVRM: Xid (PCI:0000:2a:00): 31, pid=1, MMU Fault");
    a.add("n1", "kmsg", 2000, "NVRM: Xid (PCI:0000:2a:00): 43, pid=1, Ch 00000001");
    a.add("n1", "kmsg", 2001, "NVRM: Xid (PCI:0000:2a:00): 45, pid=1, Ch 00000001");
    const auto fs = a.findings();
    REQUIRE(fs.size() == 4);
    CHECK(fs[0].when == -1);
    CHECK(fs[1].when == 0);
    CHECK(fs[1].title.find("(before the job started)") == std::string::npos);
    CHECK(fs[2].when == 0);
    CHECK(fs[2].title.find("(after the job ended)") == std::string::npos);
    CHECK(fs[3].when == 1);
}

TEST_CASE("a finding quotes its earliest line, whatever order the lines came in, and the first of a tie",
          "[forensics]") {
    Analyzer a;
    a.add("n1", "nccl", 400, "[t] n1:1:1 [0] NCCL WARN later");
    a.add("n1", "nccl", 300, "[t] n1:1:1 [0] NCCL WARN earliest");
    a.add("n1", "nccl", 300, "[t] n1:1:1 [0] NCCL WARN same time, came after");
    const auto fs = a.findings();
    REQUIRE(fs.size() == 1);
    CHECK(fs[0].ts_ns == 300);
    CHECK(fs[0].count == 3);
    CHECK(fs[0].quote == "[t] n1:1:1 [0] NCCL WARN earliest");
}

TEST_CASE("a script that succeeded or was skipped is no finding, and only the epilog's end is an exit status",
          "[forensics]") {
    Analyzer a;
    a.add("n1", "prolog", 10, "prolog status[10-ok.sh] status=0 duration_ms=3 result=\"exit 0\"");
    a.add("n1", "prolog", 11, "prolog status[20-gpu.sh] status=skipped duration_ms=0 result=\"no GPU\"");
    a.add("n1", "prolog", 12, "prolog status[30-quiet.sh] duration_ms=3");
    a.add("n1", "prolog", 13, "prolog end status=0 duration_ms=9");
    a.add("n2", "epilog", 14, "epilog end status=1 duration_ms=9");
    CHECK(a.findings().empty());
    CHECK(a.facts().exit_by_node == std::map<std::string, std::string>{{"n2", "1"}});
    a.facts().nodes = {"n1", "n2"};
    const std::string s = a.summary_text();
    CHECK(s.find("epilog on n2: status=1\n") != std::string::npos);
    CHECK(s.find("nothing recognised: no kernel or DCGM event") != std::string::npos);
    CHECK(s.find("n2:\n  nothing recognised\n") != std::string::npos);
}

TEST_CASE("the job's GPUs: an index of up to 6 digits, the first 64 of a node, from the prolog only", "[forensics]") {
    const std::string xid_on = "NVRM: Xid (PCI:0000:";
    const auto own = [&](Analyzer& a, const std::string& bus) {
        a.add("n1", "kmsg", 500, xid_on + bus + ":00): 79, pid=1, GPU has fallen off the bus.");
        const auto fs = a.findings();
        REQUIRE(fs.size() == 1);
        return fs[0].own_device;
    };
    Analyzer six;
    six.add("n1", "prolog", 100, "prolog device kind=gpu index=999999 bdf=0000:2a:00.0");
    CHECK(own(six, "2a") == 1);
    Analyzer seven;
    seven.add("n1", "prolog", 100, "prolog device kind=gpu index=1 bdf=0000:18:00.0");
    seven.add("n1", "prolog", 100, "prolog device kind=gpu index=1000000 bdf=0000:2a:00.0");
    CHECK(own(seven, "2a") == 0);
    Analyzer epilog;
    epilog.add("n1", "epilog", 100, "epilog device kind=gpu index=1 bdf=0000:2a:00.0");
    CHECK(own(epilog, "2a") == -1);
    char bdf[32];
    for (const int count : {64, 65}) {
        INFO(count << " GPUs");
        Analyzer a;
        for (int i = 1; i <= count; ++i) {
            std::snprintf(bdf, sizeof bdf, "0000:%02x:00.0", i);
            a.add("n1", "prolog", 100, "prolog device kind=gpu index=" + std::to_string(i) + " bdf=" + bdf);
        }
        std::snprintf(bdf, sizeof bdf, "%02x", count);
        CHECK(own(a, bdf) == (count == 64 ? 1 : 0));
    }
}

TEST_CASE("the bundle summary's head says the job's cluster, user, partition, nodes and window, and only what is known",
          "[forensics]") {
    Analyzer a;
    a.facts().job_id = "77";
    a.add("n1", "prolog", 10, "prolog meta cluster=c1");
    a.add("n1", "prolog", 10, "prolog meta user=alice");
    a.add("n1", "prolog", 10, "prolog meta partition=gpu");
    a.add("n1", "nccl", 100, "[t] n1:1:1 [0] NCCL WARN once");
    a.facts().nodes = {"n1", "n2"};
    a.facts().start_ns = 1'000'000'000;
    a.facts().end_ns = 2'000'000'000;
    const std::string s = a.summary_text();
    CHECK(s.starts_with("jobtrail bundle summary for job 77\n" + std::string(40, '=') +
                        "\ncluster:   c1\nuser:      alice\npartition: gpu\nnodes:     n1,n2\nwindow:    "
                        "1970-01-01T00:00:01.000000000Z .. 1970-01-01T00:00:02.000000000Z\n\nMOST LIKELY CAUSE\n"));
    CHECK(s.find("NCCL WARN\n") != std::string::npos);  // once: no count
    CHECK(s.find("(x1)") == std::string::npos);
    Analyzer none;
    none.facts().job_id = "78";
    CHECK(none.summary_text().starts_with("jobtrail bundle summary for job 78\n" + std::string(40, '=') +
                                          "\nnodes:     (none found)\n\nMOST LIKELY CAUSE\n"));
}

TEST_CASE("a local file of exactly the cap is bundled whole, one byte more is cut", "[forensics]") {
    namespace fs = std::filesystem;
    for (const size_t extra : {0, 1}) {
        INFO(4096 + extra << " bytes");
        const jobtrail::test::TempDir tmp("cap");
        const std::string& dir = tmp.path();
        job_logs(dir);
        {
            std::ofstream big(dir + "/logs/nccl/77/big.log");
            for (int i = 0; i < 64; ++i) {  // 64 lines of 64 bytes
                std::string l = "[2026-11-29T21:52:20.000000+0000] n1:1:1 [0] NCCL INFO line " + std::to_string(i);
                l.resize(63, '.');
                big << l << "\n";
            }
            if (extra) big << "x";
        }
        REQUIRE(fs::file_size(dir + "/logs/nccl/77/big.log") == 4096 + extra);
        BundleOptions o = local_bundle(dir, "out");
        o.max_file_bytes = 4096;
        const auto r = make_bundle(o);
        REQUIRE(r.exit_code == kExitOk);
        const fs::path top = extract(r.archive, dir + "/x");
        const std::string got = slurp((top / "nccl/n1/big.log").string());
        std::ifstream mf(top / "manifest.json");
        const std::string manifest((std::istreambuf_iterator<char>(mf)), std::istreambuf_iterator<char>());
        if (extra) {
            CHECK(got.find("[jobtrail] cut here: the file is longer than 4096 bytes") != std::string::npos);
            CHECK(manifest.find(R"("truncated": true)") != std::string::npos);
        } else {
            CHECK(std::count(got.begin(), got.end(), '\n') == 64);  // every line, the last included
            CHECK(got.find("NCCL INFO line 63") != std::string::npos);
            CHECK(got.find("cut here") == std::string::npos);
            CHECK(manifest.find(R"("truncated": true)") == std::string::npos);
        }
    }
}

TEST_CASE("jobtrail node: an event's title says Xid or SXid with its code, its device when known, and its meaning",
          "[forensics]") {
    NodeView v("n1");
    v.add_kernel(100, "NVRM: Xid (PCI:0000:2a:00): 79, pid=1, GPU has fallen off the bus.");
    v.add_kernel(200,
                 "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error "
                 "(First)");
    v.add_kernel(300,
                 "a.out[123]: segfault at 0 ip 00007f0000000000 sp 00007ffc00000000 error 4 in a.out[400000+1000]");
    REQUIRE(v.events().size() == 3);
    const std::string xid = "Xid 79 on 0000:2a:00: " + v.events()[0].event.meaning;
    const std::string sxid = "SXid 12028 on 0000:05:00.0: NVSwitch error (SXid)";
    const std::string segv = "segfault: A user process crashed (segmentation fault)";
    CHECK(v.events()[0].event.meaning.find("fallen off the bus") != std::string::npos);
    const std::string t = v.text(0, 1000, "test");
    CHECK(t.find("] " + xid + "\n") != std::string::npos);
    CHECK(t.find("] " + sxid + "\n") != std::string::npos);
    CHECK(t.find("] " + segv + "\n") != std::string::npos);
    const auto j = v.json(0, 1000, "test");
    CHECK(j["events"][0]["title"] == xid);
    CHECK(j["events"][1]["title"] == sxid);
    CHECK(j["events"][2]["title"] == segv);
}

TEST_CASE("jobtrail node: a job's user and uid are its meta lines', not a script's output that says user= or uid=",
          "[forensics]") {
    NodeView v("n1");
    v.add_job_line("1", "prolog", 100, "meta", "", "user=alice");
    v.add_job_line("1", "prolog", 100, "meta", "", "uid=1000");
    v.add_job_line("1", "prolog", 101, "stdout", "10-site.sh", "user=mallory");
    v.add_job_line("1", "prolog", 101, "stdout", "10-site.sh", "uid=0");
    CHECK(v.jobs().at("1").user == "alice");
    CHECK(v.jobs().at("1").uid == "1000");
    CHECK(v.text(0, 1000, "test").find("\n1 user=alice ") != std::string::npos);
}

TEST_CASE("jobtrail node: a job's GPUs are its prolog's device lines, not an epilog's nor a script's output",
          "[forensics]") {
    NodeView v("n1");
    v.add_job_line("1", "prolog", 100, "device", "", "kind=gpu index=0 bdf=0000:18:00.0");
    v.add_job_line("1", "prolog", 101, "stdout", "", "kind=gpu index=1 bdf=0000:2a:00.0");
    v.add_job_line("1", "epilog", 900, "device", "", "kind=gpu index=2 bdf=0000:3b:00.0");
    REQUIRE(v.jobs().at("1").devices.size() == 1);
    CHECK(v.jobs().at("1").devices[0].bdf == "0000:18:00.0");
    // An Xid on the GPU an epilog named is no hit of the job's.
    v.add_kernel(500, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.");
    REQUIRE(v.events().size() == 1);
    CHECK(v.events()[0].basis == "node");
}

TEST_CASE("jobtrail node: a prolog device line whose index is not all digits adds no GPU", "[forensics]") {
    NodeView v("n1");
    v.add_job_line("1", "prolog", 100, "device", "", "kind=gpu index=1a bdf=0000:18:00.0");
    v.add_job_line("1", "prolog", 100, "device", "", "kind=gpu index=+1 bdf=0000:2a:00.0");
    v.add_job_line("1", "prolog", 100, "device", "", "kind=gpu index=9 bdf=0000:3b:00.0");
    REQUIRE(v.jobs().at("1").devices.size() == 1);
    CHECK(v.jobs().at("1").devices[0].index == 9);
    CHECK(v.text(0, 1000, "test").find("    GPU 9 (0000:3b:00.0)\n") != std::string::npos);
}
