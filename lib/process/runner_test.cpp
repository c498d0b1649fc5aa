#include "process/runner.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <thread>

#include "temp_dir.hpp"

using namespace jobtrail::process;

namespace {

struct Captured {
    std::vector<std::pair<Stream, std::string>> lines;
    LineSink sink() {
        return [this](Stream s, int64_t, std::string_view l) { lines.emplace_back(s, std::string(l)); };
    }
};

RunOptions opts(int64_t timeout_ms = 5000) {
    RunOptions o;
    o.timeout_ms = timeout_ms;
    o.kill_grace_ms = 200;
    o.env = environment_with({"LC_ALL=C"});
    return o;
}

bool alive(pid_t pid) {
    std::ifstream st("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(st, line))
        if (line.rfind("State:", 0) == 0) return line.find('Z') == std::string::npos;
    return false;
}

}  // namespace

TEST_CASE("captures stdout and stderr line by line and the exit code", "[process]") {
    Captured c;
    auto r = run({"/bin/sh", "-c", "echo out1; echo err1 >&2; printf 'no newline'; exit 3"}, opts(), c.sink());
    CHECK(r.started);
    CHECK(r.exited);
    CHECK(r.exit_code == 3);
    CHECK(r.shell_status() == 3);
    CHECK_FALSE(r.ok());
    REQUIRE(c.lines.size() == 3);
    CHECK(std::count(c.lines.begin(), c.lines.end(), std::make_pair(Stream::kStdout, std::string("out1"))) == 1);
    CHECK(std::count(c.lines.begin(), c.lines.end(), std::make_pair(Stream::kStderr, std::string("err1"))) == 1);
    CHECK(std::count(c.lines.begin(), c.lines.end(), std::make_pair(Stream::kStdout, std::string("no newline"))) == 1);
}

TEST_CASE("eight identical lines in one write get eight increasing times", "[process]") {
    std::vector<std::pair<int64_t, std::string>> got;
    // One printf: one write(2), so one read() sees all eight lines.
    auto r = run({"/bin/sh", "-c", "printf 'ok\\nok\\nok\\nok\\nok\\nok\\nok\\nok\\n'; printf 'err\\n' >&2"}, opts(),
                 [&](Stream, int64_t ts, std::string_view l) { got.emplace_back(ts, std::string(l)); });
    CHECK(r.ok());
    REQUIRE(got.size() == 9);
    CHECK(std::count_if(got.begin(), got.end(), [](const auto& g) { return g.second == "ok"; }) == 8);
    for (size_t i = 1; i < got.size(); ++i) CHECK(got[i].first > got[i - 1].first);
}

TEST_CASE("a hung command is killed with its whole process group at the deadline", "[process]") {
    jobtrail::test::TempDir dir;
    const std::string pidfile = dir.path() + "/grandchild.pid";
    Captured c;
    const auto t0 = std::chrono::steady_clock::now();
    // The grandchild ignores SIGTERM, so only the SIGKILL to the group can end it.
    auto r =
        run({"/bin/sh", "-c", "sh -c 'trap \"\" TERM; sleep 60' & echo $! > " + pidfile + "; echo started; sleep 60"},
            opts(300), c.sink());
    const auto took = std::chrono::steady_clock::now() - t0;
    CHECK(r.timed_out);
    CHECK(r.shell_status() == 124);
    CHECK(took < std::chrono::seconds(5));
    REQUIRE_FALSE(c.lines.empty());
    CHECK(c.lines[0].second == "started");
    std::ifstream in(pidfile);
    pid_t gc = 0;
    in >> gc;
    REQUIRE(gc > 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK_FALSE(alive(gc));
}

TEST_CASE("a program that cannot be executed is a failure with a reason", "[process]") {
    Captured c;
    auto r = run({"/nonexistent/script.sh"}, opts(), c.sink());
    CHECK(r.shell_status() == 127);
    CHECK(r.error.find("No such file") != std::string::npos);
    jobtrail::test::TempDir dir;
    const std::string noexec = dir.path() + "/noexec.sh";
    std::ofstream(noexec) << "#!/bin/sh\necho hi\n";
    auto r2 = run({noexec}, opts(), c.sink());
    CHECK(r2.shell_status() == 126);
}

TEST_CASE("a signal death is reported as 128+signal", "[process]") {
    Captured c;
    auto r = run({"/bin/sh", "-c", "kill -SEGV $$"}, opts(), c.sink());
    CHECK(r.signaled);
    CHECK(r.signal == SIGSEGV);
    CHECK(r.shell_status() == 128 + SIGSEGV);
}

TEST_CASE("very long output lines are split at the cap, not buffered forever", "[process]") {
    Captured c;
    auto o = opts();
    o.max_line_bytes = 1000;
    auto r = run({"/bin/sh", "-c", "head -c 5500 /dev/zero | tr '\\0' 'x'"}, o, c.sink());
    CHECK(r.ok());
    size_t total = 0;
    for (auto& l : c.lines) {
        CHECK(l.second.size() <= 1000);
        total += l.second.size();
    }
    CHECK(total == 5500);
}

TEST_CASE("a background child holding the pipe does not hold us", "[process]") {
    Captured c;
    const auto t0 = std::chrono::steady_clock::now();
    auto r = run({"/bin/sh", "-c", "sleep 30 & echo done"}, opts(10'000), c.sink());
    CHECK(r.ok());
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3));
}

TEST_CASE("PATH lookup", "[process]") {
    CHECK(find_in_path("sh", "/nonexistent:/bin") == "/bin/sh");
    CHECK(find_in_path("no-such-program-here", "/bin:/usr/bin").empty());
    CHECK(find_in_path("/bin/sh", "") == "/bin/sh");
}

namespace {

// Counts lines like the collectors' sink does its work: one stamped log line per output line.
struct Counted {
    size_t lines = 0;
    std::string last;
    LineSink sink() {
        return [this](Stream, int64_t ts, std::string_view l) {
            last = std::to_string(ts) + " " + std::string(l);
            ++lines;
        };
    }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("a script that exits 0 leaving a daemon on its stdout succeeds, whatever the daemon does", "[process]") {
    // The daemon is in its own session: the process group kill does not reach it, and it keeps
    // the pipe open (quiet) or full (loud) after the script's exit, which came before the deadline.
    for (const std::string daemon : {"setsid sleep 3", "setsid yes"}) {
        INFO(daemon);
        Counted c;
        const auto t0 = std::chrono::steady_clock::now();
        auto r = run({"/bin/sh", "-c", "(" + daemon + " &); sleep 0.4; exit 0"}, opts(500), c.sink());
        const double took = seconds_since(t0);
        CHECK(r.shell_status() == 0);
        CHECK_FALSE(r.timed_out);
        CHECK(r.ok());
        // Its exit at 0.4 s, then a bounded drain of what the daemon holds.
        CHECK(took < 2.0);
    }
}

TEST_CASE("waiting for a daemon that keeps a script's pipe open is a sleep, not a spin", "[process]") {
    // After the script's exit, a daemon it left holds the pipe: the drain waits for it (200 ms)
    // without burning the CPU the job's node needs. This thread's CPU time with the daemon,
    // less without it, over five runs each: the drain's own cost.
    const auto cpu_ms = [] {
        timespec ts{};
        ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
    };
    double with = 0, without = 0;
    for (int i = 0; i < 10; ++i) {
        const bool daemon = i % 2 == 1;  // in turn: a first run's warm-up is charged to neither
        {
            Captured c;
            const double t0 = cpu_ms();
            auto r = run({"/bin/sh", "-c", daemon ? "(setsid sleep 1 &); exit 0" : "exit 0"}, opts(5000), c.sink());
            (daemon ? with : without) += cpu_ms() - t0;
            CHECK(r.ok());
        }
    }
    INFO("CPU ms, 5 runs: with a daemon holding the pipe " << with << ", without " << without);
    // Spinning through the five 200 ms drains costs hundreds of ms even on a loaded machine.
    CHECK(with - without < 100);
}

TEST_CASE("a script writing forever is killed at its deadline, however fast it writes", "[process]") {
    Counted c;
    const auto t0 = std::chrono::steady_clock::now();
    auto r = run({"/usr/bin/yes"}, opts(1000), c.sink());
    const double took = seconds_since(t0);
    CHECK(r.timed_out);
    CHECK(r.shell_status() == 124);
    CHECK(c.lines > 0);
    // The deadline, the kill grace (200 ms) and slack for a slow (sanitized) build.
    CHECK(took < 1.0 + 5.0);
}

TEST_CASE("a script that exits while a daemon floods its stdout is done at its exit, not at the deadline",
          "[process]") {
    // The daemon writes faster than we read: the pipe never runs dry, and the exit must still be
    // seen between reads (it was only at the deadline, 20 s, a prolog's whole timeout).
    Counted c;
    const auto t0 = std::chrono::steady_clock::now();
    auto r = run({"/bin/sh", "-c", "(setsid yes &); sleep 0.2; exit 3"}, opts(20'000), c.sink());
    const double took = seconds_since(t0);
    CHECK(r.shell_status() == 3);
    CHECK_FALSE(r.timed_out);
    CHECK(c.lines > 0);
    // Its exit, the drain (200 ms) and slack for a slow (sanitized) build: far from 20 s.
    CHECK(took < 5.0);
}

TEST_CASE("what a run says of itself names how it ended", "[process]") {
    Captured c;
    CHECK(run({"/bin/sh", "-c", "exit 3"}, opts(), c.sink()).describe() == "exit 3");
    CHECK(run({"/bin/sh", "-c", "exit 0"}, opts(), c.sink()).describe() == "exit 0");
    const auto usr1 = run({"/bin/sh", "-c", "kill -USR1 $$"}, opts(), c.sink());  // no core file left
    CHECK(usr1.describe() == "killed by signal " + std::to_string(SIGUSR1) + " (" + strsignal(SIGUSR1) + ")");
    const auto hung = run({"/bin/sh", "-c", "sleep 30"}, opts(100), c.sink());
    CHECK(hung.describe() == "timed out, process group killed");
    const auto none = run({}, opts(), c.sink());
    CHECK_FALSE(none.started);
    CHECK(none.shell_status() == 127);
    CHECK(none.describe() == "did not start: empty command");
    const auto missing = run({"/nonexistent/prolog.sh"}, opts(), c.sink());
    CHECK(missing.error.find("cannot execute /nonexistent/prolog.sh: ") == 0);
    CHECK(c.lines.empty());
}

TEST_CASE("a line of exactly the cap is one line, its newline coming later adds no empty line", "[process]") {
    Captured c;
    auto o = opts();
    o.max_line_bytes = 1000;
    // The newline comes in a later read: the 1000 bytes wait for it, being no more than the cap.
    auto r = run({"/bin/sh", "-c", "head -c 1000 /dev/zero | tr '\\0' 'x'; sleep 0.2; echo; echo next"}, o, c.sink());
    CHECK(r.ok());
    REQUIRE(c.lines.size() == 2);
    CHECK(c.lines[0].second == std::string(1000, 'x'));
    CHECK(c.lines[1].second == "next");
}

TEST_CASE("an errno left from before the run is not taken for the kernel saying the script is gone", "[process]") {
    // The caller's last failed call may have left ECHILD (a waitpid of its own, a script run with
    // SIGCHLD ignored): a script still running must still run to its end and give its status.
    for (const int stale : {ECHILD, EAGAIN}) {
        INFO("errno before the run: " << stale);
        Captured c;
        errno = stale;
        auto r = run({"/bin/sh", "-c", "sleep 0.3; echo done; exit 3"}, opts(), c.sink());
        CHECK(r.exited);
        CHECK(r.exit_code == 3);
        CHECK(r.error.empty());
        REQUIRE(c.lines.size() == 1);
        CHECK(c.lines[0].second == "done");
    }
}

TEST_CASE("what the script leaves running in its process group is killed when it exits", "[process]") {
    // Like slurmd: a prolog's background job does not outlive it.
    Captured c;
    auto r = run({"/bin/sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!; exit 0"}, opts(), c.sink());
    CHECK(r.ok());
    REQUIRE(c.lines.size() == 1);
    const pid_t bg = std::stoi(c.lines[0].second);
    bool gone = false;
    for (int i = 0; i < 100 && !gone; ++i) {
        gone = !alive(bg);
        if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    CHECK(gone);
}

TEST_CASE("an exit status the kernel reaped for us is said, not taken for a success", "[process]") {
    // A parent that ignores SIGCHLD (as some daemons do) gets no exit status: waitpid says ECHILD.
    struct sigaction old {};
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    REQUIRE(sigaction(SIGCHLD, &ign, &old) == 0);
    Captured c;
    auto r = run({"/bin/sh", "-c", "echo hi; exit 3"}, opts(), c.sink());
    sigaction(SIGCHLD, &old, nullptr);
    CHECK(r.started);
    CHECK(r.error == "exit status unavailable (SIGCHLD ignored)");
    CHECK_FALSE(r.exited);
    CHECK_FALSE(r.ok());
    CHECK(r.shell_status() == 1);
    CHECK(r.describe() == "exit status unavailable (SIGCHLD ignored)");
    CHECK_FALSE(r.timed_out);
    REQUIRE(c.lines.size() == 1);
    CHECK(c.lines[0].second == "hi");
}

TEST_CASE("PATH lookup skips empty entries, directories and files that are not executable", "[process]") {
    jobtrail::test::TempDir dir;
    const std::string a = dir.path() + "/a", b = dir.path() + "/b", c = dir.path() + "/c";
    for (const auto& d : {a, b, c}) REQUIRE(::mkdir(d.c_str(), 0755) == 0);
    REQUIRE(::mkdir((a + "/tool").c_str(), 0755) == 0);  // a directory of that name
    std::ofstream(b + "/tool") << "#!/bin/sh\n";         // not executable
    std::ofstream(c + "/tool") << "#!/bin/sh\n";
    REQUIRE(::chmod((c + "/tool").c_str(), 0755) == 0);
    CHECK(find_in_path("tool", ":" + a + "::" + b + ":" + c) == c + "/tool");
    CHECK(find_in_path("tool", a + ":" + b).empty());
    CHECK(find_in_path("tool", c + ":").empty() == false);
    CHECK(find_in_path("tool", "").empty());
    CHECK(find_in_path(b + "/tool", "/bin").empty());  // a path is taken as is, if executable
    CHECK(find_in_path(c + "/tool", "").size() > 0);
}

TEST_CASE("the environment given replaces a variable of exactly that name only", "[process]") {
    ::setenv("JOBTRAIL_T_VAR", "old", 1);
    ::setenv("JOBTRAIL_T_VARX", "kept", 1);
    const auto env = environment_with({"JOBTRAIL_T_VAR=new", "JOBTRAIL_T_ADDED=1"});
    ::unsetenv("JOBTRAIL_T_VAR");
    ::unsetenv("JOBTRAIL_T_VARX");
    const auto count = [&](const std::string& kv) { return std::count(env.begin(), env.end(), kv); };
    CHECK(count("JOBTRAIL_T_VAR=new") == 1);
    CHECK(count("JOBTRAIL_T_VAR=old") == 0);
    CHECK(count("JOBTRAIL_T_VARX=kept") == 1);
    CHECK(count("JOBTRAIL_T_ADDED=1") == 1);
}

TEST_CASE("a last line without newline is kept when a daemon still holds the pipe at the end", "[process]") {
    // The daemon (its own session: the group kill misses it) writes part of a line and keeps the
    // pipe open past the drain: what it wrote is emitted when the run gives up the pipe.
    Captured c;
    auto r = run({"/bin/sh", "-c", "(setsid sh -c 'printf partial; sleep 3' &); sleep 1; exit 0"}, opts(), c.sink());
    CHECK(r.ok());
    REQUIRE(c.lines.size() == 1);
    CHECK(c.lines[0] == std::make_pair(Stream::kStdout, std::string("partial")));
}
