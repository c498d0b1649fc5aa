#include "forensics/bundle/find_job.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "common/time.hpp"
#include "loki/push.hpp"
#include "loki_double.hpp"
#include "temp_dir.hpp"

using namespace jobtrail::forensics;

namespace {

// A stand-in for a Slurm command: a shell script that prints `out` and `err`.
std::string command(const jobtrail::test::TempDir& dir, const std::string& name, const std::string& out,
                    const std::string& err = "") {
    const std::string path = dir.path() + "/" + name;
    std::ofstream(path) << "#!/bin/sh\nprintf '%s' '" << out << "'\nprintf '%s' '" << err << "' >&2\n";
    ::chmod(path.c_str(), 0755);
    return path;
}

}  // namespace

TEST_CASE("bundle: a job Loki has no record of is found in Slurm's accounting, its nodes expanded by scontrol",
          "[bundle]") {
    jobtrail::test::TempDir dir("slurm");
    BundleOptions o;
    o.job_id = "4242";
    o.sacct = command(dir, "sacct", "1795989142|1795989342|gpu[01-02]\n");
    // What scontrol says on stderr (a warning about its config) is not one of the job's nodes.
    o.scontrol = command(dir, "scontrol", "gpu01\ngpu02\n", "scontrol: warning: cannot read slurm.conf\n\n");
    bundle::Window w;
    REQUIRE(bundle::window_from_slurm(o, w));
    CHECK(w.nodes == std::vector<std::string>{"gpu01", "gpu02"});
    CHECK(w.start_ns == 1795989142'000'000'000);
    CHECK(w.end_ns == 1795989342'000'000'000);
    CHECK(w.basis == "sacct");

    // Without scontrol the nodelist stands as Slurm wrote it; a job sacct gave no nodes is not found.
    o.scontrol = dir.path() + "/no-scontrol";
    bundle::Window bare;
    REQUIRE(bundle::window_from_slurm(o, bare));
    CHECK(bare.nodes == std::vector<std::string>{"gpu[01-02]"});
    o.sacct = command(dir, "sacct-pending", "1795989142|Unknown|None assigned\n");
    bundle::Window none;
    CHECK_FALSE(bundle::window_from_slurm(o, none));
}

TEST_CASE("bundle: a job's nodelists are taken up to 16384 distinct nodes in all, one more is said and left out",
          "[bundle][double]") {
    jobtrail::test::LokiDouble loki;
    BundleOptions o;
    o.job_id = "7";
    o.endpoint.url = loki.url();
    jobtrail::loki::Client c(o.endpoint);
    const int64_t t = jobtrail::realtime_ns() - 3'600'000'000'000;
    // One node's prolog, its nodelist naming 16384 nodes: itself among them (distinct nodes in
    // all: exactly the cap), or not (one more).
    const std::string node = GENERATE("n00001", "n16385");
    INFO("the node with records: " << node);
    std::vector<jobtrail::loki::Stream> streams(1);
    streams[0].labels = {{"job", "slurm-prolog-epilog"}, {"node", node}, {"job_id", "7"}};
    streams[0].entries = {{t, "prolog meta nodelist=n[00001-16384]", {}}};
    REQUIRE(c.push(jobtrail::loki::encode_push(streams, false)).status == 204);
    const auto found = bundle::find_job(o);
    INFO(found.error << found.nodelist_notes);
    REQUIRE(found.exit_code == kExitOk);
    if (node == "n00001") {
        CHECK(found.window.nodes.size() == 16384);
        CHECK(found.missing_nodes.size() == 16383);
        CHECK(found.nodelist_notes.find("more than") == std::string::npos);
    } else {
        CHECK(found.window.nodes == std::vector<std::string>{"n16385"});
        CHECK(found.missing_nodes.empty());
        CHECK(found.nodelist_notes.find("the job's nodelists name more than 16384 nodes: n[00001-16384] left out") !=
              std::string::npos);
    }
}

namespace {

// Pushes one node's prolog/epilog lines of job 7 (at their times) to the double.
void push_job_lines(const std::string& url, const std::string& node,
                    const std::vector<std::pair<int64_t, std::string>>& lines) {
    jobtrail::loki::Endpoint ep;
    ep.url = url;
    jobtrail::loki::Client c(ep);
    std::vector<jobtrail::loki::Stream> streams(1);
    streams[0].labels = {{"job", "slurm-prolog-epilog"}, {"node", node}, {"job_id", "7"}};
    for (const auto& [ts, line] : lines) streams[0].entries.push_back({ts, line, {}});
    REQUIRE(c.push(jobtrail::loki::encode_push(streams, false)).status == 204);
}

constexpr int64_t kSec = 1'000'000'000;

// Job `id` looked up in the double only: no sacct answers.
BundleOptions loki_only(const jobtrail::test::LokiDouble& loki, const std::string& id) {
    BundleOptions o;
    o.job_id = id;
    o.endpoint.url = loki.url();
    o.sacct = "/nonexistent/sacct";
    return o;
}

}  // namespace

TEST_CASE(
    "bundle: the job's latest run is found from its prolog to its epilog's end, an earlier job of its id "
    "is said and left out",
    "[bundle][double]") {
    jobtrail::test::LokiDouble loki;
    const int64_t t = (jobtrail::realtime_ns() / kSec - 7200) * kSec;
    // An earlier job 7 on n0 (its epilog ended at t + 10 s), then this one on n1 and n2.
    push_job_lines(loki.url(), "n0",
                   {{t, "prolog meta user=bob"}, {t + 10 * kSec, "epilog end status=0 duration_ms=1"}});
    push_job_lines(loki.url(), "n1",
                   {{t + 100 * kSec, "prolog meta user=alice"},
                    {t + 200 * kSec, "epilog meta user=alice"},
                    {t + 300 * kSec, "epilog end status=0 duration_ms=1"}});
    push_job_lines(loki.url(), "n2", {{t + 101 * kSec, "prolog meta user=alice"}});
    BundleOptions o = loki_only(loki, "7");
    const auto found = bundle::find_job(o);
    INFO(found.error << found.nodelist_notes);
    REQUIRE(found.exit_code == kExitOk);
    CHECK(found.window.nodes == std::vector<std::string>{"n1", "n2"});
    CHECK(found.window.start_ns == t + 100 * kSec);
    CHECK(found.window.end_ns == t + 300 * kSec);
    CHECK(found.job_start_ns == t + 100 * kSec);
    CHECK(found.job_end_ns == t + 300 * kSec);
    CHECK(found.window.basis == "prolog/epilog records in Loki");
    CHECK(found.nodelist_notes == "an earlier job with id 7 has records up to " +
                                      jobtrail::format_rfc3339_ns(t + 10 * kSec) +
                                      ": it is another job, left out; give --start and --end around it to bundle "
                                      "that one\n");

    // A window given around it is cut to the job's own, and says so.
    o.start_ns = t + 50 * kSec;
    o.end_ns = t + 400 * kSec;
    const auto within = bundle::find_job(o);
    REQUIRE(within.exit_code == kExitOk);
    CHECK(within.window.start_ns == t + 100 * kSec);
    CHECK(within.window.end_ns == t + 300 * kSec);
    CHECK(within.window.basis == "prolog/epilog records in Loki, within the options");
    // One inside it cuts the job's.
    o.start_ns = t + 150 * kSec;
    o.end_ns = t + 250 * kSec;
    const auto inside = bundle::find_job(o);
    REQUIRE(inside.exit_code == kExitOk);
    CHECK(inside.window.start_ns == t + 150 * kSec);
    CHECK(inside.window.end_ns == t + 250 * kSec);
}

TEST_CASE("bundle: a job without its epilog's end runs on: its window reaches to now", "[bundle][double]") {
    jobtrail::test::LokiDouble loki;
    const int64_t t = (jobtrail::realtime_ns() / kSec - 7200) * kSec;
    push_job_lines(loki.url(), "n1",
                   {{t, "prolog meta user=alice"},
                    {t + 5 * kSec, "epilog status[10-a.sh] status=0 duration_ms=1"},
                    {t + 6 * kSec, "epilog meta user=alice"}});
    BundleOptions o = loki_only(loki, "7");
    const auto found = bundle::find_job(o);
    INFO(found.error << found.nodelist_notes);
    REQUIRE(found.exit_code == kExitOk);
    CHECK(found.window.start_ns == t);
    CHECK(found.window.end_ns == 0);
    CHECK(found.job_start_ns == t);
    CHECK(found.job_end_ns == 0);
    CHECK(found.nodelist_notes.empty());
}

TEST_CASE("bundle: a job neither Loki nor Slurm knows is not found and the error says where it looked",
          "[bundle][double]") {
    jobtrail::test::LokiDouble loki;
    BundleOptions o = loki_only(loki, "9");
    const auto found = bundle::find_job(o);
    CHECK(found.exit_code == kExitNotFound);
    CHECK(found.error ==
          "job 9: no prolog/epilog records in Loki over the last 168 h and no accounting record; give --nodes, "
          "--start and --end");
    o.start_ns = jobtrail::realtime_ns() - 3600 * kSec;
    CHECK(bundle::find_job(o).error ==
          "job 9: no prolog/epilog records in Loki in the window given and no accounting record; give --nodes, "
          "--start and --end");
}
