#include "collector/scripts.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "collector_job.hpp"
#include "temp_dir.hpp"

using namespace jobtrail::collector;

TEST_CASE("globbed scripts run in reverse alphabetical order, like slurmd", "[collector]") {
    jobtrail::test::TempDir dir;
    for (const char* n : {"10-first.sh", "20-second.sh", "05-zero.sh"})
        std::ofstream(dir.path() + "/" + n) << "#!/bin/sh\n";
    std::vector<std::string> errors;
    auto v = expand_scripts({dir.path() + "/*", dir.path() + "/missing-*"}, errors);
    CHECK(errors.empty());
    REQUIRE(v.size() == 3);
    CHECK(v[0] == dir.path() + "/20-second.sh");
    CHECK(v[2] == dir.path() + "/05-zero.sh");
}

TEST_CASE("job facts come from Slurm's Prolog environment", "[collector]") {
    ::setenv("SLURM_JOB_ID", "4242", 1);
    ::setenv("SLURM_JOB_USER", "alice", 1);
    ::setenv("SLURMD_NODENAME", "gpu017", 1);
    ::setenv("SPANK_JOBTRAIL_TRACE", "INFO:NET", 1);
    auto f = job_facts_from_env("", "");
    CHECK(f.valid_job_id());
    CHECK(f.job_id == "4242");
    CHECK(f.node == "gpu017");
    CHECK(f.trace == "INFO:NET");
    bool has = false;
    for (auto& [k, v] : header_fields(f)) has = has || (k == "SPANK_JOBTRAIL_TRACE" && v == "INFO:NET");
    CHECK(has);
    ::setenv("SLURM_JOB_ID", "../../etc/passwd", 1);
    CHECK_FALSE(job_facts_from_env("", "").valid_job_id());
    for (const char* v : {"SLURM_JOB_ID", "SLURM_JOB_USER", "SLURMD_NODENAME", "SPANK_JOBTRAIL_TRACE"}) ::unsetenv(v);
}

namespace {

using jobtrail::test::CollectorJob;

// Whether a line with this tag holds `part`.
bool logged(const std::vector<CollectorJob::Line>& log, std::string_view tag, std::string_view part) {
    for (const auto& l : log)
        if (l.tag == tag && l.text.find(part) != std::string::npos) return true;
    return false;
}

}  // namespace

TEST_CASE("a failing site script is the prolog's exit status and the scripts after it never run, like slurmd",
          "[collector]") {
    CollectorJob job("  prolog:\n    probes: []\n    scripts: [\"@DIR@/prolog.d/*\"]\n");
    ::mkdir((job.dir() + "/prolog.d").c_str(), 0755);
    job.script("prolog.d/30-ok.sh", "echo gpus healthy");
    job.script("prolog.d/20-fail.sh", "echo 'ECC errors on GPU 2' >&2; exit 3");
    job.script("prolog.d/10-never.sh", "touch " + job.dir() + "/10-ran");
    ScriptsOutcome o;
    {
        Session s(Phase::kProlog, job.config());
        o = run_site_scripts(s);
    }
    CHECK(o.status == 3);
    CHECK(o.ran == 2);
    CHECK(o.failed == job.dir() + "/prolog.d/20-fail.sh");
    CHECK_FALSE(std::filesystem::exists(job.dir() + "/10-ran"));
    CHECK(job.text("prolog", "stdout", "30-ok.sh") == "gpus healthy");
    CHECK(job.text("prolog", "stderr", "20-fail.sh") == "ECC errors on GPU 2");
    CHECK(job.text("prolog", "status", "30-ok.sh").rfind("status=0 ", 0) == 0);
    CHECK(job.text("prolog", "status", "20-fail.sh").rfind("status=3 ", 0) == 0);
    CHECK(job.text("prolog", "status", "10-never.sh") == "(none)");
}

TEST_CASE("a site script past script_timeout is killed, fails with 124 and says so: the total_timeout bounds them all",
          "[collector]") {
    SECTION("script_timeout") {
        CollectorJob job("  epilog:\n    probes: []\n    script_timeout: 200ms\n    scripts: [\"@DIR@/hang.sh\"]\n");
        job.script("hang.sh", "echo started; sleep 30");
        ScriptsOutcome o;
        {
            Session s(Phase::kEpilog, job.config());
            o = run_site_scripts(s);
        }
        CHECK(o.status == 124);
        CHECK(o.failed == job.dir() + "/hang.sh");
        const auto log = job.log("epilog");
        CHECK(job.text("epilog", "stdout", "hang.sh") == "started");
        CHECK(job.text("epilog", "status", "hang.sh").rfind("status=124 ", 0) == 0);
        CHECK(logged(log, "jobtrail",
                     "error: " + job.dir() + "/hang.sh timed out and was killed with its process group"));
    }
    SECTION("total_timeout: a script started late gets what is left of it, not its own 10 s") {
        CollectorJob job(
            "  prolog:\n    probes: []\n    script_timeout: 10s\n    total_timeout: 700ms\n"
            "    scripts: [\"@DIR@/b.sh\", \"@DIR@/a.sh\"]\n");
        job.script("b.sh", "sleep 0.4");
        job.script("a.sh", "sleep 30");
        ScriptsOutcome o;
        {
            Session s(Phase::kProlog, job.config());
            o = run_site_scripts(s);
        }
        CHECK(o.status == 124);
        CHECK(o.failed == job.dir() + "/a.sh");
        CHECK(job.text("prolog", "status", "b.sh").rfind("status=0 ", 0) == 0);
        // a.sh runs with what is left of the 700 ms (on a machine too slow to leave any, it
        // does not run at all and still fails).
        const auto run = job.text("prolog", "run", "a.sh");
        if (run != "(none)") {
            CHECK(o.ran == 2);
            CHECK(std::stoll(run.substr(run.find("timeout_ms=") + 11)) <= 300);
        }
    }
}

TEST_CASE("probes: one not installed is skipped, one that hangs is killed at its timeout, {job_id} is the job's",
          "[collector]") {
    CollectorJob job(
        "  prolog:\n    scripts: []\n    probes:\n"
        "      - {name: gone, command: [no-such-probe], timeout: 1s}\n"
        "      - {name: stats, command: [stats-probe, \"--jstart\", \"{job_id}\"], timeout: 5s}\n"
        "      - {name: hung, command: [hung-probe], timeout: 200ms}\n",
        "4243");
    job.script("bin/stats-probe", "echo \"started $1 $2\"; echo done >&2");
    job.script("bin/hung-probe", "sleep 30");
    std::map<std::string, std::vector<std::string>> out;
    {
        Session s(Phase::kProlog, job.config());
        out = run_probes(s);
    }
    CHECK(out.count("gone") == 0);
    CHECK(out["stats"] == std::vector<std::string>{"started --jstart 4243"});
    const auto log = job.log("prolog");
    CHECK(job.text("prolog", "status", "gone") ==
          "status=skipped result=\"no-such-probe not found in " + job.dir() + "/bin\"");
    CHECK(job.text("prolog", "run", "gone") == "(none)");
    CHECK(job.text("prolog", "probe", "stats") == "started --jstart 4243");
    CHECK(job.text("prolog", "probe-err", "stats") == "done");
    CHECK(job.text("prolog", "status", "stats").rfind("status=0 ", 0) == 0);
    CHECK(job.text("prolog", "status", "hung").rfind("status=124 ", 0) == 0);
    CHECK(logged(log, "jobtrail", "warning: probe hung timed out; killed and skipped"));
    CHECK_FALSE(logged(log, "jobtrail", "warning: probe stats"));
}

TEST_CASE(
    "a probe's output kept for the collector is its first 256 stdout lines of at most 1024 bytes and all of it "
    "logged",
    "[collector]") {
    CollectorJob job(
        "  prolog:\n    scripts: []\n    probes:\n"
        "      - {name: chatty, command: [chatty-probe, \"{job_id}:{job_id}\"], timeout: 10s}\n");
    job.script("bin/chatty-probe", "echo \"$1\"; i=2; while [ $i -le 300 ]; do echo \"line $i\"; i=$((i+1)); done");
    std::map<std::string, std::vector<std::string>> out;
    {
        Session s(Phase::kProlog, job.config());
        out = run_probes(s);
    }
    const auto& kept = out["chatty"];
    REQUIRE(kept.size() == 256);
    CHECK(kept.front() == "4242:4242");  // every {job_id} replaced
    CHECK(kept[1] == "line 2");
    CHECK(kept.back() == "line 256");
    size_t logged_lines = 0;
    for (const auto& l : job.log("prolog"))
        if (l.tag == "probe" && l.name == "chatty") ++logged_lines;
    CHECK(logged_lines == 300);  // the job log has every line
}

TEST_CASE("a probe line longer than 1024 bytes is kept cut to 1024 for the collector", "[collector]") {
    CollectorJob job(
        "  prolog:\n    scripts: []\n    probes:\n"
        "      - {name: wide, command: [wide-probe], timeout: 10s}\n");
    job.script("bin/wide-probe", "printf 'x%.0s' $(seq 1 1100); echo; printf 'y%.0s' $(seq 1 1024); echo");
    std::map<std::string, std::vector<std::string>> out;
    {
        Session s(Phase::kProlog, job.config());
        out = run_probes(s);
    }
    REQUIRE(out["wide"].size() == 2);
    CHECK(out["wide"][0] == std::string(1024, 'x'));
    CHECK(out["wide"][1] == std::string(1024, 'y'));
}

TEST_CASE("a script pattern matching a directory runs only the files and a pattern that cannot be read is said",
          "[collector]") {
    CollectorJob job("  prolog:\n    probes: []\n    scripts: [\"@DIR@/loop/*\", \"@DIR@/prolog.d/*\"]\n");
    ::mkdir((job.dir() + "/prolog.d").c_str(), 0755);
    ::mkdir((job.dir() + "/prolog.d/50-a-directory").c_str(), 0755);
    ::symlink("loop", (job.dir() + "/loop").c_str());  // opendir fails with ELOOP
    job.script("prolog.d/10-ok.sh", "echo ran");
    ScriptsOutcome o;
    {
        Session s(Phase::kProlog, job.config());
        o = run_site_scripts(s);
    }
    CHECK(o.status == 0);
    CHECK(o.ran == 1);
    CHECK(job.text("prolog", "stdout", "10-ok.sh") == "ran");
    CHECK(job.text("prolog", "run", "50-a-directory") == "(none)");
    CHECK(logged(job.log("prolog"), "jobtrail", "error: cannot expand script pattern '" + job.dir() + "/loop/*'"));
}
