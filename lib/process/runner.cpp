#include "process/runner.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "common/fs.hpp"
#include "common/stamps.hpp"
#include "common/time.hpp"

extern char** environ;

namespace jobtrail::process {

int RunResult::shell_status() const {
    if (!started) return 127;
    if (timed_out) return 124;
    if (signaled) return 128 + signal;
    if (!exited) return 1;  // its status was lost: never taken for a success
    return exit_code;
}

std::string RunResult::describe() const {
    std::string s;
    if (!started) return "did not start: " + error;
    if (timed_out) {
        s = "timed out, process group killed";
        if (abandoned) s += " (did not exit after SIGKILL; abandoned)";
        return s;
    }
    if (signaled) return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
    if (!exited) return error.empty() ? "exit status unknown" : error;
    return "exit " + std::to_string(exit_code);
}

std::string find_in_path(const std::string& program, const std::string& path_list) {
    if (program.find('/') != std::string::npos) return ::access(program.c_str(), X_OK) == 0 ? program : "";
    size_t pos = 0;
    while (pos <= path_list.size()) {
        size_t end = path_list.find(':', pos);
        if (end == std::string::npos) end = path_list.size();
        std::string dir = path_list.substr(pos, end - pos);
        pos = end + 1;
        if (dir.empty()) continue;
        std::string cand = dir + "/" + program;
        struct stat st {};
        if (::stat(cand.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(cand.c_str(), X_OK) == 0) return cand;
    }
    return "";
}

std::vector<std::string> environment_with(const std::vector<std::string>& overrides) {
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e) {
        std::string_view kv(*e);
        const std::string_view key = kv.substr(0, kv.find('='));
        bool replaced = false;
        for (const auto& o : overrides)
            if (std::string_view(o).substr(0, o.find('=')) == key) replaced = true;
        if (!replaced) env.emplace_back(kv);
    }
    env.insert(env.end(), overrides.begin(), overrides.end());
    return env;
}

namespace {

// How long grandchildren may hold the pipes after the script exited (their last lines).
constexpr int64_t kDrainNs = 200'000'000;
constexpr int64_t kReadSliceNs = 50'000'000;  // at most this much reading between reaps

struct Pipe {
    Fd fd;
    std::string partial;
    Stream stream;
};

// Both ends of a pipe, each closed on every way out.
struct PipePair {
    Fd read, write;
    Status open() {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) return Status::failure("pipe: " + errno_text(errno));
        read.reset(fds[0]);
        write.reset(fds[1]);
        return Status::success();
    }
};

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
    return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
    (void)pid;
    return -1;
#endif
}

// One read() can carry many lines: each gets its own time, so identical lines stay distinct in
// Loki, which keeps one entry per (stream, timestamp, line).
void emit_lines(Pipe& p, const char* data, size_t n, size_t max_line, StrictStamps& stamps, const LineSink& sink) {
    p.partial.append(data, n);
    size_t start = 0;
    for (;;) {
        const size_t nl = p.partial.find('\n', start);
        if (nl == std::string::npos) break;
        sink(p.stream, stamps.now(), std::string_view(p.partial).substr(start, nl - start));
        start = nl + 1;
    }
    p.partial.erase(0, start);
    // A line without newline longer than the cap is emitted in pieces, never buffered forever.
    while (p.partial.size() > max_line) {
        sink(p.stream, stamps.now(), std::string_view(p.partial).substr(0, max_line));
        p.partial.erase(0, max_line);
    }
}

void flush_partial(Pipe& p, StrictStamps& stamps, const LineSink& sink) {
    if (!p.partial.empty()) {
        sink(p.stream, stamps.now(), p.partial);
        p.partial.clear();
    }
}

}  // namespace

RunResult run(const std::vector<std::string>& argv, const RunOptions& opts, const LineSink& sink) {
    RunResult res;
    const int64_t t0 = monotonic_ns();
    if (argv.empty()) {
        res.error = "empty command";
        return res;
    }
    PipePair out, err, exec_err;
    for (PipePair* p : {&out, &err, &exec_err})
        if (auto st = p->open(); !st.ok) {
            res.error = st.error;
            return res;
        }

    // Everything the child needs is prepared before fork: only async-signal-safe calls after.
    std::vector<char*> cargv;
    cargv.reserve(argv.size() + 1);
    for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    std::vector<char*> cenv;
    cenv.reserve(opts.env.size() + 1);
    for (const auto& e : opts.env) cenv.push_back(const_cast<char*>(e.c_str()));
    cenv.push_back(nullptr);

    const pid_t pid = ::fork();
    if (pid < 0) {
        res.error = "fork: " + errno_text(errno);
        return res;
    }
    if (pid == 0) {
        ::setpgid(0, 0);
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        ::signal(SIGPIPE, SIG_DFL);
        const int devnull = ::open("/dev/null", O_RDONLY);
        if (devnull >= 0) ::dup2(devnull, 0);
        ::dup2(out.write.get(), 1);
        ::dup2(err.write.get(), 2);
        ::execve(cargv[0], cargv.data(), cenv.data());
        const int e = errno;
        (void)!::write(exec_err.write.get(), &e, sizeof e);
        ::_exit(e == ENOENT ? 127 : 126);
    }
    ::setpgid(pid, pid);  // also from the parent, so killpg works even before the child runs
    out.write.reset();
    err.write.reset();
    exec_err.write.reset();

    int exec_errno = 0;
    if (::read(exec_err.read.get(), &exec_errno, sizeof exec_errno) == sizeof exec_errno) {
        res.error = "cannot execute " + argv[0] + ": " + errno_text(exec_errno);
    }
    exec_err.read.reset();
    res.started = true;

    Pipe pipes[2] = {{std::move(out.read), {}, Stream::kStdout}, {std::move(err.read), {}, Stream::kStderr}};
    for (auto& p : pipes) ::fcntl(p.fd.get(), F_SETFL, ::fcntl(p.fd.get(), F_GETFL) | O_NONBLOCK);
    Fd pidfd(open_pidfd(pid));

    const int64_t deadline = t0 + opts.timeout_ms * 1'000'000;
    int64_t kill_at = 0;      // when SIGKILL goes out after SIGTERM
    int64_t give_up_at = 0;   // when we stop waiting for a killed group
    int64_t drain_until = 0;  // after the child exits, how long grandchildren may hold pipes
    bool reaped = false, status_lost = false;
    int status = 0;
    char buf[16384];
    StrictStamps stamps;  // one sequence for both pipes: the sink may write them to one file
    // The exit status, taken whenever it is there: one that came before the deadline is the
    // script's answer, whatever its daemons do with the pipes afterwards.
    const auto reap = [&](int64_t now) {
        if (reaped) return;
        const pid_t w = ::waitpid(pid, &status, WNOHANG);
        if (w == pid || (w < 0 && errno == ECHILD)) {
            // ECHILD: someone set SIGCHLD to SIG_IGN and the kernel reaped it for us.
            if (w < 0) {
                res.error = "exit status unavailable (SIGCHLD ignored)";
                status_lost = true;
            }
            reaped = true;
            drain_until = now + kDrainNs;
        }
    };
    // The next moment the loop must act at: the deadline, the SIGKILL, giving up, the drain's end.
    const auto next_due = [&] {
        int64_t t = INT64_MAX;
        for (int64_t d :
             {reaped || res.timed_out ? int64_t{0} : deadline, kill_at, give_up_at, reaped ? drain_until : int64_t{0}})
            if (d > 0 && d < t) t = d;
        return t;
    };

    for (;;) {
        const int64_t now = monotonic_ns();
        reap(now);
        const bool pipes_open = pipes[0].fd.valid() || pipes[1].fd.valid();
        if (reaped && (!pipes_open || now >= drain_until)) break;
        // The deadline is the script's: once it exited, only the drain's own bound applies.
        if (!reaped && !res.timed_out && now >= deadline) {
            res.timed_out = true;
            ::killpg(pid, SIGTERM);
            kill_at = now + opts.kill_grace_ms * 1'000'000;
        }
        if (res.timed_out && kill_at && now >= kill_at) {
            ::killpg(pid, SIGKILL);
            kill_at = 0;
            give_up_at = now + 1'000'000'000;
        }
        if (give_up_at && now >= give_up_at && !reaped) {
            res.abandoned = true;
            break;
        }

        pollfd pfds[3];
        nfds_t n = 0;
        int idx[3] = {-1, -1, -1};
        for (int i = 0; i < 2; ++i)
            if (pipes[i].fd.valid()) {
                idx[n] = i;
                pfds[n++] = {pipes[i].fd.get(), POLLIN, 0};
            }
        if (!reaped && pidfd.valid()) pfds[n++] = {pidfd.get(), POLLIN, 0};
        int64_t wait_ns = 50'000'000;  // upper bound if pidfd is unavailable
        if (pidfd.valid() && !reaped) wait_ns = 1'000'000'000;
        auto clamp = [&](int64_t t) {
            if (t > 0 && t - now < wait_ns) wait_ns = t - now;
        };
        clamp(next_due());
        if (wait_ns < 0) wait_ns = 0;
        const int rc = ::poll(pfds, n, static_cast<int>((wait_ns + 999'999) / 1'000'000));
        if (rc < 0 && errno != EINTR) break;
        // Reading also stops after a slice, so that the exit is reaped between reads: a daemon
        // flooding the pipe otherwise held the loop (and the prolog) until the deadline.
        const int64_t due = std::min(next_due(), monotonic_ns() + kReadSliceNs);
        for (nfds_t k = 0; k < n; ++k) {
            if (idx[k] < 0 || pfds[k].revents == 0) continue;
            Pipe& p = pipes[idx[k]];
            // A writer faster than the sink never lets the pipe run dry: the clock is read between
            // reads, and the loop goes back to its deadlines when one is due.
            for (;;) {
                if (monotonic_ns() >= due) break;
                const ssize_t r = ::read(p.fd.get(), buf, sizeof buf);
                if (r > 0) {
                    emit_lines(p, buf, static_cast<size_t>(r), opts.max_line_bytes, stamps, sink);
                    continue;
                }
                if (r < 0 && (errno == EAGAIN || errno == EINTR)) break;
                flush_partial(p, stamps, sink);
                p.fd.reset();
                break;
            }
        }
    }
    for (auto& p : pipes)
        if (p.fd.valid()) {
            flush_partial(p, stamps, sink);
            p.fd.reset();
        }
    // Like slurmd: whatever the script left behind in its process group goes with it.
    if (reaped) ::killpg(pid, SIGKILL);

    if (reaped && !status_lost) {
        if (WIFEXITED(status)) {
            res.exited = true;
            res.exit_code = WEXITSTATUS(status);
        } else if (WIFSIGNALED(status)) {
            res.signaled = true;
            res.signal = WTERMSIG(status);
        }
    }
    if (exec_errno != 0) {
        res.exited = true;
        res.exit_code = exec_errno == ENOENT ? 127 : 126;
    }
    res.duration_ms = (monotonic_ns() - t0) / 1'000'000;
    return res;
}

}  // namespace jobtrail::process
