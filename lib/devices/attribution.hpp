#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "node/job_state.hpp"

// Which job a kernel record concerns, judged at the record's own time: the job that owned the
// PCI device it names, the job whose memory cgroup an OOM kill names, or else every job running
// on the node then. The shipper tags kernel records with it, the epilog and the CLI say it.
namespace jobtrail::devices {

enum class Basis { kDevice, kMemcg, kNode };
std::string_view basis_name(Basis b);  // device, memcg, node

struct Attribution {
    Basis basis = Basis::kNode;
    std::string owner;                        // the one job it concerns; empty when node-wide
    std::vector<std::string> running;         // every job running on the node then, in id order
    const node::JobDevice* device = nullptr;  // the owner's device, for device attribution
    std::string note;                         // why a record naming a device is node-wide ("0000:5e:00.0 is no job's")

    // The jobs it concerns: the owner, or for a node-wide record every job running then.
    std::vector<std::string> jobs() const { return owner.empty() ? running : std::vector<std::string>{owner}; }
};

// Where Slurm puts its jobs' cgroups (collector.slurm_cgroup_roots): cgroup v2 with slurmd under
// systemd (<root>/job_<id>/step_<s>/user/task_<n>) and cgroup v1 (<root>/uid_<uid>/job_<id>/...).
// Nothing below them is a user's to create; a systemd-delegated subtree (/user.slice/...) is.
std::vector<std::string> default_slurm_cgroup_roots();

// The Slurm job in an OOM kill's cgroup line ("oom-kill:constraint=CONSTRAINT_MEMCG,...,
// oom_memcg=/slurm/uid_1000/job_42,task_memcg=/slurm/uid_1000/job_42/step_0/task_0,task=python,
// pid=4242,uid=1000", kernel 4.19 and later; cgroup v2 paths end in .../job_42/step_0/user/task_0),
// and the pid and uid it killed. oom_memcg counts (task_memcg when there is none, a global OOM): a
// job_<id> right below one of `roots` (after cgroup v1's uid_<uid>), nowhere else. Empty job when
// the line is not one of these; `refused` says why a cgroup named job_<id> elsewhere is no job's.
struct OomKill {
    std::string job_id;
    std::string cgroup_uid;  // cgroup v1's uid_<uid> above the job, if any
    std::string uid;         // the kernel's uid= (the killed task's owner), if any
    std::string refused;
    long pid = -1;
};
OomKill parse_oom_kill(std::string_view message, const std::vector<std::string>& roots);
// The pid of "…Out of memory: Killed process 4242 (python) …", or -1.
long killed_pid(std::string_view message);

class Attributor {
public:
    explicit Attributor(std::vector<std::string> slurm_cgroup_roots = default_slurm_cgroup_roots())
        : roots_(std::move(slurm_cgroup_roots)) {}
    // A job on the node: end_ns 0 while it runs; uid its user's (empty when unknown: then no OOM
    // kill is the job's, as nothing shows the killed task was its user's).
    void upsert(const std::string& job_id, const std::string& uid, int64_t start_ns, int64_t end_ns,
                std::vector<node::JobDevice> devices, std::string devices_note);
    void erase(const std::string& job_id) { jobs_.erase(job_id); }
    size_t size() const { return jobs_.size(); }

    // Feed kernel records in order: an oom-kill line teaches which job its pid was in, for the
    // "Killed process" record that follows it. pci_bdf is the device the record names, if any.
    // An oom-kill whose cgroup is no job's user's (outside Slurm's roots, another user's uid) is
    // node-wide, and its note says "not attributed: ...".
    Attribution attribute(int64_t ts_ns, std::string_view message, std::string_view pci_bdf);

    // The job's own devices, and which other job owned a device at ts (for "a GPU of another job").
    const std::vector<node::JobDevice>* devices_of(const std::string& job_id) const;
    std::string owner_of(std::string_view pci_bdf, int64_t ts_ns) const;

private:
    struct Job {
        int64_t start_ns = 0, end_ns = 0;
        std::vector<node::JobDevice> devices;
        std::vector<std::string> keys;  // bdf_key of each device
        std::string note;
        std::string uid;
    };
    struct OomPid {
        long pid;
        std::string job_id, note;  // the job it was in, or why it was not attributed
    };
    std::string memcg_owner(const OomKill& k, std::string& note) const;
    bool running_at(const Job& j, int64_t ts) const { return j.start_ns <= ts && (j.end_ns == 0 || ts <= j.end_ns); }
    std::vector<std::string> roots_;
    std::map<std::string, Job> jobs_;
    std::deque<OomPid> oom_pids_;  // recent oom-kill pids, bounded
};

}  // namespace jobtrail::devices
