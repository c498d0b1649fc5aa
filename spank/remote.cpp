// slurmstepd (S_CTX_REMOTE), once per job step on each node: the per-job NCCL directory and the
// step record (as root, in init_post_opt), then the step's NCCL environment (user_init).
// Every failure is logged and swallowed: the step runs regardless.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include "common/fs.hpp"
#include "common/time.hpp"
#include "node/job_state.hpp"
#include "node/nccl_file.hpp"
#include "plugin.hpp"

namespace jobtrail::spank {
namespace {

// Filled in init_post_opt, used in user_init (same slurmstepd process). Trivial types only.
struct StepState {
    bool active;  // a normal or batch step (not extern), ids known
    bool nccl_dir_ok;
    unsigned long job_id;
    unsigned long step_id;
};
StepState g_step;

bool mkdirs_root(const std::string& path, std::string& err) {
    for (size_t pos = 1; pos <= path.size(); ++pos) {
        if (pos != path.size() && path[pos] != '/') continue;
        const std::string part = path.substr(0, pos);
        if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
            err = "cannot create " + part + ": " + std::strerror(errno);
            return false;
        }
    }
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        err = path + " is not a directory";
        return false;
    }
    // Users must not be able to plant entries (symlinks, other jobs' directories) in it.
    if (st.st_uid != 0 || (st.st_mode & 022) != 0) {
        err = path + " must be owned by root and writable only by root";
        return false;
    }
    return true;
}

// "<jobid> <start_ns>": what makes a job unique on this node even when job ids repeat (a
// reset controller starts again at 1). start_ns comes from the prolog's job marker.
std::string job_identity(const PluginConfig& cfg, const std::string& job_id) {
    const auto m = node::read_job_marker(layout_of(cfg), job_id);
    return job_id + " " + (m ? std::to_string(m->start_ns) : std::string("unknown"));
}

// The stamp sits in a directory the job's user owns: never follow a link or block on a FIFO
// they put there (slurmstepd would hang the step launch).
std::string read_stamp(const std::string& dir) {
    return read_small_file(dir + "/" + std::string(node::kNcclDirStamp), 256).value_or("");
}

// An existing <nccl_dir>/<jobid> is this job's only if it is a real directory owned by the job
// user and stamped with this job's identity.
bool is_ours(const std::string& dir, uid_t uid, const std::string& identity) {
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != uid) return false;
    return read_stamp(dir) == identity;
}

// Creates <nccl_dir>/<jobid> as root, owned by the job user, mode 0700, never through a symlink
// and never reusing another job's directory. Concurrent steps race safely: the directory is
// built under a temporary name and renamed into place.
bool ensure_job_dir(const PluginConfig& cfg, const std::string& job_id, uid_t uid, gid_t gid, std::string& err) {
    if (!mkdirs_root(cfg.nccl_dir, err)) return false;
    const std::string dir = layout_of(cfg).nccl_job_dir(job_id);
    const std::string identity = job_identity(cfg, job_id);
    for (int attempt = 0; attempt < 3; ++attempt) {
        struct stat st {};
        if (::lstat(dir.c_str(), &st) == 0) {
            if (is_ours(dir, uid, identity)) return true;
            // Another job's (same id after a controller reset) or something planted: move aside.
            const std::string aside = dir + ".stale." + std::to_string(static_cast<long long>(::time(nullptr))) + "." +
                                      std::to_string(static_cast<long>(::getpid()));
            if (::rename(dir.c_str(), aside.c_str()) != 0) {
                err = "cannot move aside stale " + dir + ": " + std::strerror(errno);
                return false;
            }
            JT_INFO("moved stale %s (not this job's) to %s", dir.c_str(), aside.c_str());
        }
        const std::string tmp = dir + ".tmp." + std::to_string(static_cast<long>(::getpid()));
        if (::mkdir(tmp.c_str(), 0700) != 0) {
            err = "cannot create " + tmp + ": " + std::strerror(errno);
            return false;
        }
        const std::string stamp = tmp + "/" + std::string(node::kNcclDirStamp);
        const int fd = ::open(stamp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
        const bool stamped = fd >= 0 && write_all(fd, identity);
        if (fd >= 0) ::close(fd);
        if (!stamped || ::chown(tmp.c_str(), uid, gid) != 0 || ::chmod(tmp.c_str(), 0700) != 0) {
            err = "cannot prepare " + tmp + ": " + std::strerror(errno);
            ::unlink(stamp.c_str());
            ::rmdir(tmp.c_str());
            return false;
        }
        if (::rename(tmp.c_str(), dir.c_str()) == 0) return true;
        // Lost the race to another step of this job: use theirs.
        ::unlink(stamp.c_str());
        ::rmdir(tmp.c_str());
    }
    if (is_ours(dir, uid, identity)) return true;
    err = "could not establish " + dir;
    return false;
}

// The step's record for the shipper (its trace request: a step may ask when its job did not).
void write_step_record(const PluginConfig& cfg, const std::string& job_id, const std::string& step,
                       const TraceRequest& trace, bool nccl_dir_ok) {
    const node::Layout layout = layout_of(cfg);
    std::string err;
    if (!mkdirs_root(layout.steps_dir(), err)) {
        JT_ERROR("job %s step %s: no step record: %s", job_id.c_str(), step.c_str(), err.c_str());
        return;
    }
    const node::StepRecord r{job_id, step, trace_to_string(trace), realtime_ns(),
                             nccl_dir_ok ? node::nccl_debug_file(layout, job_id, step) : std::string()};
    if (auto st = node::write_step_record(layout, r); !st.ok)
        JT_ERROR("job %s step %s: no step record: %s", job_id.c_str(), step.c_str(), st.error.c_str());
}

}  // namespace

int remote_init_post_opt(spank_t sp) {
    g_step = StepState{};
    uint32_t job_id = 0, step_id = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS) {
        JT_ERROR("cannot read job/step/user ids; NCCL policy not applied to this step");
        return ESPANK_SUCCESS;
    }
    const std::string step = step_name(step_id);
    if (step == "extern") return ESPANK_SUCCESS;  // no user tasks run in it
    g_step.active = true;
    g_step.job_id = job_id;
    g_step.step_id = step_id;
    const State& s = state();
    const std::string jid = std::to_string(job_id);
    std::string err;
    g_step.nccl_dir_ok = ensure_job_dir(s.cfg, jid, uid, gid, err);
    if (!g_step.nccl_dir_ok)
        JT_ERROR("job %s step %s: NCCL debug files stay off (NCCL_DEBUG_FILE not set): %s", jid.c_str(), step.c_str(),
                 err.c_str());
    write_step_record(s.cfg, jid, step, s.trace, g_step.nccl_dir_ok);
    return ESPANK_SUCCESS;
}

int remote_user_init(spank_t sp) {
    if (!g_step.active) return ESPANK_SUCCESS;
    const State& s = state();
    char user_debug[64] = "";
    char user_file[kPathMax] = "";
    const bool has_debug = spank_getenv(sp, "NCCL_DEBUG", user_debug, sizeof user_debug) == ESPANK_SUCCESS;
    const bool has_file = spank_getenv(sp, "NCCL_DEBUG_FILE", user_file, sizeof user_file) == ESPANK_SUCCESS;
    StepEnvInput in{&s.cfg,
                    &s.trace,
                    std::to_string(g_step.job_id),
                    step_name(g_step.step_id),
                    g_step.nccl_dir_ok,
                    has_debug ? user_debug : nullptr,
                    has_file ? user_file : nullptr};
    for (const auto& [k, v] : step_env(in)) {
        const spank_err_t rc = spank_setenv(sp, k.c_str(), v.c_str(), 1);
        if (rc != ESPANK_SUCCESS) JT_ERROR("cannot set %s: %s", k.c_str(), spank_strerror(rc));
    }
    return ESPANK_SUCCESS;
}

}  // namespace jobtrail::spank
