#include "forensics/bundle/find_job.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>

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
