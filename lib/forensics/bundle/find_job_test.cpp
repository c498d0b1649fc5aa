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
