#include "collector/job_devices.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "common/fs.hpp"
#include "common/text.hpp"
#include "common/time.hpp"
#include "joblog/format.hpp"
#include "process/runner.hpp"

namespace jobtrail::collector {
namespace {

constexpr int64_t kBudgetMs = 5'000;  // all the prolog spends on devices
constexpr unsigned kNvidiaMajor = 195;

}  // namespace

// The slurmd of the Slurm that runs us, for a Slurm installed under a prefix (/opt/slurm/sbin is
// in no PATH): the Prolog and Epilog run below slurmd or slurmstepd, whose sbin/ holds slurmd.
// Only our own ancestors are looked at, which no job user controls.
std::string slurmd_beside(pid_t pid) {
    for (int depth = 0; depth < 4 && pid > 1; ++depth) {
        const std::string proc = "/proc/" + std::to_string(pid);
        char exe[4096];
        const ssize_t n = ::readlink((proc + "/exe").c_str(), exe, sizeof exe - 1);
        if (n > 0) {
            const std::string path(exe, static_cast<size_t>(n));
            const std::string base = path.substr(path.rfind('/') + 1);
            if (base == "slurmd" || base == "slurmstepd") {
                const std::string slurmd = path.substr(0, path.rfind('/') + 1) + "slurmd";
                if (::access(slurmd.c_str(), X_OK) == 0) return slurmd;
            }
        }
        // The parent's parent, from its stat line: "pid (comm) state ppid ..." (comm may hold ')').
        const auto stat = read_small_file(proc + "/stat", 4096);
        if (!stat) break;
        const size_t close = stat->rfind(')');
        if (close == std::string::npos || close + 4 > stat->size()) break;
        pid = static_cast<pid_t>(std::atoi(stat->c_str() + close + 4));
    }
    return "";
}

namespace {

// A program's standard output under what is left of the budget: the driver's /proc files and
// slurmd -G can block on a wedged GPU, and the prolog must not. The child is left behind if
// the kernel holds it (process::run gives up on it), never waited for.
bool run_bounded(const Session& s, std::vector<std::string> argv, int64_t deadline_ms, std::vector<std::string>& out,
                 std::string& why, bool with_stderr = false) {
    const int64_t left = deadline_ms - monotonic_ns() / 1'000'000;
    if (left <= 0) {
        why = "no time left of the " + std::to_string(kBudgetMs) + " ms device budget";
        return false;
    }
    std::string exe = process::find_in_path(argv[0], s.config().collector.path);
    if (exe.empty() && argv[0] == "slurmd") exe = slurmd_beside(::getppid());
    if (exe.empty()) {
        why = argv[0] + " not found";
        return false;
    }
    argv[0] = exe;
    process::RunOptions o;
    o.timeout_ms = left;
    o.kill_grace_ms = 200;
    o.env = s.child_env();
    const auto r = process::run(argv, o, [&](process::Stream st, int64_t, std::string_view line) {
        if ((with_stderr || st == process::Stream::kStdout) && out.size() < 1024)
            out.emplace_back(line.substr(0, 4096));
    });
    if (r.timed_out) {
        why = argv[0] + " timed out";
        return false;
    }
    if (!r.exited || r.exit_code != 0) {
        why = argv[0] + ": " + r.describe();
        return false;
    }
    return true;
}

// The driver's GPUs, each information file read by `cat` under the budget.
std::vector<devices::GpuInfo> driver_gpus(const Session& s, int64_t deadline, std::string& note) {
    std::vector<devices::GpuInfo> out;
    const std::string dir = s.config().collector.nvidia_proc + "/gpus";
    std::vector<std::string> names;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (const dirent* e = ::readdir(d))
            if (e->d_name[0] != '.' && names.size() < 64) names.emplace_back(e->d_name);
        ::closedir(d);
    } else {
        note = "no GPU list at " + dir;
        return out;
    }
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
        std::vector<std::string> lines;
        std::string why;
        if (!run_bounded(s, {"cat", "--", dir + "/" + n + "/information"}, deadline, lines, why)) {
            note += (note.empty() ? "" : "; ") + std::string("driver entry ") + logfmt_value(n) + ": " + why;
            if (why.find("timed out") != std::string::npos || why.find("no time left") != std::string::npos) break;
            continue;
        }
        std::string text;
        for (const auto& l : lines) text += l + "\n";
        if (auto g = devices::parse_nvidia_information(text))
            out.push_back(std::move(*g));
        else
            note += (note.empty() ? "" : "; ") + std::string("driver entry ") + logfmt_value(n) + " unreadable";
    }
    return out;
}

// Slurm's GPU index -> device minor, from the GRES device files.
// `unread`: why GPUs past the mapped ones could not be mapped (a MIG slice, no file named).
std::map<int, int> index_to_minor(const Session& s, int64_t deadline, std::string& note, std::string& unread) {
    std::map<int, int> out;
    std::vector<std::string> lines;
    std::string why;
    // slurmd -G prints the GRES as log lines, on standard error.
    if (!run_bounded(s, s.config().collector.gres_command, deadline, lines, why, /*with_stderr=*/true)) {
        note = "cannot map SLURM_JOB_GPUS to devices (collector.gres_command: " + why + ")";
        return out;
    }
    for (const auto& [index, file] : devices::parse_gres_gpu_files(lines, &unread)) {
        struct stat st {};
        if (::stat(file.c_str(), &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == kNvidiaMajor)
            out.emplace(index, static_cast<int>(minor(st.st_rdev)));
    }
    if (out.empty()) note = "collector.gres_command listed no GPU device file";
    return out;
}

}  // namespace

devices::Resolution resolve_job_devices(const Session& s,
                                        const std::map<std::string, std::vector<std::string>>& probe_stdout) {
    if (s.facts().gpus.empty()) return {};
    const int64_t deadline = monotonic_ns() / 1'000'000 + kBudgetMs;
    std::string map_note, driver_note, unread;
    const auto minors = index_to_minor(s, deadline, map_note, unread);
    const auto gpus = minors.empty() ? std::vector<devices::GpuInfo>() : driver_gpus(s, deadline, driver_note);
    std::map<std::string, std::string> serials;
    for (const auto& [name, lines] : probe_stdout)
        for (auto& [k, v] : devices::serials_from_smi_csv(lines)) serials.emplace(k, v);
    auto r = devices::resolve_job_gpus(s.facts().gpus, minors, gpus, serials);
    if (!map_note.empty()) r.note = map_note;
    // Said only where it leaves one of the job's GPUs unmapped.
    if (!unread.empty() && !r.note.empty()) r.note += " (unresolved, its kernel events node-wide: " + unread + ")";
    if (!driver_note.empty() && !r.note.empty()) r.note += "; " + driver_note;
    return r;
}

void log_job_devices(Session& s, const devices::Resolution& r) {
    for (const auto& d : r.devices) {
        std::string text = "kind=" + d.kind + " index=" + std::to_string(d.index) + " bdf=" + logfmt_value(d.bdf);
        if (!d.uuid.empty()) text += " uuid=" + logfmt_value(d.uuid);
        if (!d.serial.empty()) text += " serial=" + logfmt_value(d.serial);
        s.log().line(realtime_ns(), joblog::kDevice, "", text, /*force=*/true);
    }
    if (!r.note.empty())
        s.log().line(realtime_ns(), joblog::kDevice, "unresolved",
                     "note=" + logfmt_value(r.note) + " attribution=node-wide", /*force=*/true);
}

}  // namespace jobtrail::collector
