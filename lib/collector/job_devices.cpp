#include "collector/job_devices.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>

#include "common/text.hpp"
#include "common/time.hpp"
#include "joblog/format.hpp"
#include "process/runner.hpp"

namespace jobtrail::collector {
namespace {

constexpr int64_t kBudgetMs = 5'000;  // all the prolog spends on devices
constexpr unsigned kNvidiaMajor = 195;

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
    const std::string exe = process::find_in_path(argv[0], s.config().collector.path);
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
std::map<int, int> index_to_minor(const Session& s, int64_t deadline, std::string& note) {
    std::map<int, int> out;
    std::vector<std::string> lines;
    std::string why;
    // slurmd -G prints the GRES as log lines, on standard error.
    if (!run_bounded(s, s.config().collector.gres_command, deadline, lines, why, /*with_stderr=*/true)) {
        note = "cannot map SLURM_JOB_GPUS to devices (collector.gres_command: " + why + ")";
        return out;
    }
    for (const auto& [index, file] : devices::parse_gres_gpu_files(lines)) {
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
    std::string map_note, driver_note;
    const auto minors = index_to_minor(s, deadline, map_note);
    const auto gpus = minors.empty() ? std::vector<devices::GpuInfo>() : driver_gpus(s, deadline, driver_note);
    std::map<std::string, std::string> serials;
    for (const auto& [name, lines] : probe_stdout)
        for (auto& [k, v] : devices::serials_from_smi_csv(lines)) serials.emplace(k, v);
    auto r = devices::resolve_job_gpus(s.facts().gpus, minors, gpus, serials);
    if (!map_note.empty()) r.note = map_note;
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
