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

// The Slurm job in an OOM kill's cgroup line ("oom-kill:constraint=CONSTRAINT_MEMCG,...,
// oom_memcg=/slurm/uid_1000/job_42,task_memcg=/slurm/uid_1000/job_42/step_0/task_0,task=python,
// pid=4242,uid=1000", kernel 4.19 and later; cgroup v2 paths end in .../job_42/step_0/user/task_0),
// and the pid it killed. The first job_<id> component of task_memcg (else oom_memcg) counts:
// deeper ones could be a job's own sub-cgroups. Empty job when the line is not one of these.
struct OomKill {
    std::string job_id;
    long pid = -1;
};
OomKill parse_oom_kill(std::string_view message);
// The pid of "…Out of memory: Killed process 4242 (python) …", or -1.
long killed_pid(std::string_view message);

class Attributor {
public:
    // A job on the node: end_ns 0 while it runs.
    void upsert(const std::string& job_id, int64_t start_ns, int64_t end_ns, std::vector<node::JobDevice> devices,
                std::string devices_note);
    void erase(const std::string& job_id) { jobs_.erase(job_id); }
    size_t size() const { return jobs_.size(); }

    // Feed kernel records in order: an oom-kill line teaches which job its pid was in, for the
    // "Killed process" record that follows it. pci_bdf is the device the record names, if any.
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
    };
    bool running_at(const Job& j, int64_t ts) const { return j.start_ns <= ts && (j.end_ns == 0 || ts <= j.end_ns); }
    std::map<std::string, Job> jobs_;
    std::deque<std::pair<long, std::string>> oom_pids_;  // recent oom-kill pid -> job, bounded
};

}  // namespace jobtrail::devices
