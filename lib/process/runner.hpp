#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace jobtrail::process {

enum class Stream { kStdout, kStderr };

struct RunOptions {
    int64_t timeout_ms = 60'000;
    int64_t kill_grace_ms = 1'000;  // between SIGTERM and SIGKILL to the process group
    size_t max_line_bytes = size_t{64} * 1024;
    std::vector<std::string> env;  // full environment for the child ("K=V")
};

struct RunResult {
    bool started = false;  // false: fork/exec failed (see error)
    bool exited = false;   // normal exit, exit_code valid
    int exit_code = 0;
    bool signaled = false;  // killed by signal `signal`
    int signal = 0;
    bool timed_out = false;  // we killed it at its deadline
    bool abandoned = false;  // did not die even after SIGKILL (e.g. stuck in the kernel)
    int64_t duration_ms = 0;
    std::string error;

    // The status Slurm would see: 0 on success, the exit code, 128+signal, 126/127 for exec
    // failures, 124 (as timeout(1)) when it outlived its deadline.
    int shell_status() const;
    bool ok() const { return started && exited && exit_code == 0 && !timed_out; }
    std::string describe() const;  // "exit=0", "killed by signal 9 (timeout after 30000 ms)", ...
};

// Called for each output line as it arrives, with its arrival time (UTC ns; strictly increasing
// over the run, both streams together), without '\n'.
using LineSink = std::function<void(Stream, int64_t ts_ns, std::string_view line)>;

// Runs argv[0] (a path; no PATH search) in its own process group with stdin on /dev/null,
// capturing stdout and stderr line by line. Returns within timeout + kill_grace + ~1 s whatever
// the child does: a process group that will not die is abandoned, never waited for forever.
RunResult run(const std::vector<std::string>& argv, const RunOptions& opts, const LineSink& sink);

// Looks a program up in a PATH-style list; returns the full path or empty.
std::string find_in_path(const std::string& program, const std::string& path_list);

// The current environment with `overrides` ("K=V") replacing same-named variables.
std::vector<std::string> environment_with(const std::vector<std::string>& overrides);

}  // namespace jobtrail::process
