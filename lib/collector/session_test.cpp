#include "collector/session.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "captured.hpp"
#include "collector/cli.hpp"
#include "collector/kernel_snapshot.hpp"
#include "collector/scripts.hpp"
#include "collector_job.hpp"
#include "common/time.hpp"
#include "jobtrail/version.hpp"

using namespace jobtrail;
using namespace jobtrail::collector;
using test::captured;
using test::CollectorJob;

namespace {

bool logged(const std::vector<CollectorJob::Line>& log, std::string_view tag, std::string_view part) {
    for (const auto& l : log)
        if (l.tag == tag && l.text.find(part) != std::string::npos) return true;
    return false;
}

}  // namespace

TEST_CASE("a collector run outside slurmd writes no job log and says why, and says so of a missing config file",
          "[collector]") {
    test::TempDir dir;
    ::unsetenv("SLURM_JOB_ID");
    const std::string err = captured(2, [&] { Session s(Phase::kProlog, dir.path() + "/missing.yaml"); });
    CHECK(err.find("jobtrail-prolog: error: SLURM_JOB_ID is missing or not a number ('')") != std::string::npos);
    CHECK(err.find("jobtrail-prolog: warning: config file " + dir.path() + "/missing.yaml not found; using defaults") !=
          std::string::npos);
}

TEST_CASE("a config with a bad value: the default is kept, the error is said in the job log and counted in its header",
          "[collector]") {
    CollectorJob job("  epilog:\n    probes: []\n    scripts: []\n    script_timeout: soon\n");
    const std::string err = captured(2, [&] {
        Session s(Phase::kEpilog, job.config());
        CHECK(s.phase_config().script_timeout_ms == 300'000);
        s.header();
        s.footer(0, "");
    });
    CHECK(err.find("collector.epilog.script_timeout") != std::string::npos);
    const auto log = job.log("epilog");
    CHECK(logged(log, "jobtrail", "error: config: "));
    CHECK(logged(log, "jobtrail", "collector.epilog.script_timeout"));
    CHECK(logged(log, "jobtrail", "(default kept)"));
    CHECK(job.text("epilog", "meta", "") == "phase=epilog");
    CHECK(logged(log, "meta", "config=" + job.config() + " (1 errors)"));
    CHECK(logged(log, "end", "status=0 duration_ms="));
}

TEST_CASE("a site script that cannot be executed fails the prolog with 126, as it would under slurmd", "[collector]") {
    CollectorJob job("  prolog:\n    probes: []\n    scripts: [\"@DIR@/not-executable.sh\", \"@DIR@/missing.sh\"]\n");
    job.script("not-executable.sh", "exit 0");
    ::chmod((job.dir() + "/not-executable.sh").c_str(), 0644);
    ScriptsOutcome o;
    {
        Session s(Phase::kProlog, job.config());
        o = run_site_scripts(s);
    }
    CHECK(o.status == 126);
    CHECK(o.failed == job.dir() + "/not-executable.sh");
    CHECK(job.text("prolog", "status", "not-executable.sh").rfind("status=126 ", 0) == 0);
}

TEST_CASE("a prolog that cannot read the kernel log saves no mark, and its epilog says what it used instead",
          "[collector]") {
    CollectorJob job("  kmsg: @DIR@/no-kmsg\n");
    std::string mark;
    {
        Session s(Phase::kProlog, job.config());
        mark = s.config().collector.layout().kmsg_mark("4242");
        record_kernel_mark(s);
    }
    const auto prolog = job.log("prolog");
    CHECK(logged(prolog, "jobtrail", "error: kernel log: "));
    CHECK(logged(prolog, "jobtrail", "no-kmsg"));
    CHECK(logged(prolog, "jobtrail", "no kmsg mark for this job (the epilog will use its start time)"));
    CHECK(mark.rfind(job.dir() + "/state/", 0) == 0);
    CHECK_FALSE(std::filesystem::exists(mark));
    {
        Session s(Phase::kEpilog, job.config());
        events::Extractor ex;
        CHECK(record_kernel_delta(s, ex).empty());
    }
    const auto epilog = job.log("epilog");
    CHECK(logged(epilog, "jobtrail", "warning: no kmsg mark for this job; using whole ring (no mark, no start time)"));
    CHECK(logged(epilog, "jobtrail", "error: kernel log: "));
    CHECK(logged(epilog, "event", "basis=\"whole ring (no mark, no start time)\" kmsg_records=0 fatal=0"));
}

TEST_CASE(
    "collectors: --version, unknown arguments ignored, and an internal failure exits 0 so the node is not drained",
    "[collector]") {
    const auto call = [](std::vector<std::string> args, const std::function<int(const std::string&)>& run) {
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        return collector_main(static_cast<int>(argv.size()), argv.data(), "jobtrail-epilog", run);
    };
    int rc = -1;
    const std::string out = captured(1, [&] {
        rc = call({"jobtrail-epilog", "--version"}, [](const std::string&) -> int { throw std::logic_error("ran"); });
    });
    CHECK(rc == 0);
    CHECK(out == std::string("jobtrail-epilog ") + kVersion + "\n");

    std::string given;
    std::string err = captured(2, [&] {
        rc = call({"jobtrail-epilog", "-c", "/etc/site.yaml", "extra", "args"}, [&](const std::string& path) {
            given = path;
            return 3;
        });
    });
    CHECK(rc == 3);  // the site scripts' status
    CHECK(given == "/etc/site.yaml");
    CHECK(err.find("jobtrail-epilog: warning: ignoring 2 unexpected arguments") != std::string::npos);

    err = captured(2, [&] {
        rc = call({"jobtrail-epilog"}, [](const std::string&) -> int { throw std::runtime_error("disk on fire"); });
    });
    CHECK(rc == 0);
    CHECK(err.find("jobtrail-epilog: error: internal failure, exiting 0 so the node is not drained: disk on fire") !=
          std::string::npos);
}

TEST_CASE("one of jobtrail's own steps that throws is said in the job log and the collector goes on", "[collector]") {
    CollectorJob job("");
    bool after = false;
    {
        Session s(Phase::kProlog, job.config());
        captured(2, [&] {
            guarded(s, "devices", [] { throw std::runtime_error("no such GPU"); });
            guarded(s, "probes", [] { throw 42; });
        });
        after = true;
        s.footer(0, "");
    }
    CHECK(after);
    const auto log = job.log("prolog");
    CHECK(logged(log, "jobtrail", "error: devices failed: no such GPU"));
    CHECK(logged(log, "jobtrail", "error: probes failed"));
}

TEST_CASE("a prolog's job log opens with its meta lines in order and ends with its status and summary", "[collector]") {
    CollectorJob job("");
    captured(2, [&] {
        Session s(Phase::kProlog, job.config());
        s.header();
        s.footer(3, "probes=2");
    });
    const auto log = job.log("prolog");
    std::vector<std::string> meta, end;
    for (const auto& l : log) {
        if (l.tag == "meta") meta.push_back(l.text);
        if (l.tag == "end") end.push_back(l.text);
    }
    REQUIRE(meta.size() >= 6);
    CHECK(meta[0] == "phase=prolog");
    CHECK(meta[1] == std::string("jobtrail_version=") + kVersion);
    REQUIRE(meta[2].starts_with("start_time="));
    CHECK(parse_rfc3339_ns(meta[2].substr(11)));
    CHECK(meta[3] == "job_id=4242");
    CHECK(meta[meta.size() - 2] == "config=" + job.config());
    CHECK(meta.back().starts_with("boot_id="));
    REQUIRE(end.size() == 1);
    CHECK(std::regex_match(end[0], std::regex("status=3 duration_ms=[0-9]+\\.[0-9]{3} probes=2")));

    CollectorJob again("", "4343");
    captured(2, [&] {
        Session s(Phase::kEpilog, again.config());
        s.footer(0, "");
    });
    CHECK(std::regex_match(again.text("epilog", "end", ""), std::regex("status=0 duration_ms=[0-9]+\\.[0-9]{3}")));
}

TEST_CASE(
    "collectors: a site script's exit status is seen even when slurmd's caller ignored SIGCHLD and SIGPIPE "
    "never kills them",
    "[collector]") {
    CollectorJob job("  prolog:\n    probes: []\n    scripts: [\"@DIR@/fails.sh\"]\n");
    job.script("fails.sh", "exit 3");
    // Put back whatever happens below: the other cases of this process need SIGCHLD.
    struct Restore {
        struct sigaction chld {
        }, pipe{};
        Restore() {
            ::sigaction(SIGCHLD, nullptr, &chld);
            ::sigaction(SIGPIPE, nullptr, &pipe);
        }
        ~Restore() {
            ::sigaction(SIGCHLD, &chld, nullptr);
            ::sigaction(SIGPIPE, &pipe, nullptr);
        }
    } restore;
    std::signal(SIGCHLD, SIG_IGN);  // inherited from a parent that did not care for its children
    std::signal(SIGPIPE, SIG_DFL);
    std::string argv0 = "jobtrail-prolog", flag = "-c", path = job.config();
    char* argv[] = {argv0.data(), flag.data(), path.data()};
    int status = -1;
    bool pipe_ignored = false;
    const int rc = collector_main(3, argv, "jobtrail-prolog", [&](const std::string& config) {
        struct sigaction now {};
        ::sigaction(SIGPIPE, nullptr, &now);
        pipe_ignored = now.sa_handler == SIG_IGN;
        Session s(Phase::kProlog, config);
        status = run_site_scripts(s).status;
        return status;
    });
    CHECK(status == 3);  // not 0: a failed prolog script read as success would start the job
    CHECK(rc == 3);
    CHECK(pipe_ignored);
}

TEST_CASE("collectors: --help names the phase and its slurm.conf key and a bad argument is said and ignored",
          "[collector]") {
    const auto call = [](std::vector<std::string> args, const char* prog) {
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        int rc = -1;
        bool ran = false;
        // CLI11 prints its help on std::cout, which Catch's own reporters may have taken over:
        // read it there, whatever the reporter.
        std::ostringstream help;
        struct Swap {
            std::streambuf* old;
            ~Swap() { std::cout.rdbuf(old); }
        } swap{std::cout.rdbuf(help.rdbuf())};
        const std::string err = captured(2, [&] {
            rc = collector_main(static_cast<int>(argv.size()), argv.data(), prog, [&](const std::string&) {
                ran = true;
                return 0;
            });
        });
        return std::tuple{rc, ran, help.str() + err};
    };
    auto [rc, ran, out] = call({"jobtrail-epilog", "--help"}, "jobtrail-epilog");
    CHECK(rc == 0);
    CHECK_FALSE(ran);
    CHECK(out.find("jobtrail-epilog: Slurm Epilog collector of jobtrail (configure it as slurm.conf Epilog=)") !=
          std::string::npos);
    CHECK(out.find("--config") != std::string::npos);
    std::tie(rc, ran, out) = call({"jobtrail-prolog", "--help"}, "jobtrail-prolog");
    CHECK(out.find("jobtrail-prolog: Slurm Prolog collector of jobtrail (configure it as slurm.conf Prolog=)") !=
          std::string::npos);
    // -c without its value: said, and the collector still runs (a prolog must not fail the job).
    std::tie(rc, ran, out) = call({"jobtrail-prolog", "-c"}, "jobtrail-prolog");
    CHECK(ran);
    CHECK(rc == 0);
    CHECK(out.find("jobtrail-prolog: warning: ignoring bad arguments: ") != std::string::npos);
}

TEST_CASE("collectors: a failure that is no std::exception also exits 0 and says so", "[collector]") {
    std::string argv0 = "jobtrail-epilog";
    char* argv[] = {argv0.data()};
    int rc = -1;
    const std::string err = captured(
        2, [&] { rc = collector_main(1, argv, "jobtrail-epilog", [](const std::string&) -> int { throw 42; }); });
    CHECK(rc == 0);
    CHECK(err == "jobtrail-epilog: error: internal failure, exiting 0 so the node is not drained\n");
}
