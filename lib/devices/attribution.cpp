#include "devices/attribution.hpp"

#include <algorithm>
#include <charconv>
#include <optional>

#include "devices/gpus.hpp"
#include "node/layout.hpp"

namespace jobtrail::devices {
namespace {

constexpr size_t kOomMemory = 64;

bool is_digits(std::string_view s) {
    return !s.empty() && s.size() <= 10 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The next component of `path` at `from` ("" at the end), and where the one after it starts.
std::string_view component(std::string_view path, size_t& from) {
    if (from >= path.size()) return {};
    size_t to = path.find('/', from);
    if (to == std::string_view::npos) to = path.size();
    const auto part = path.substr(from, to - from);
    from = to + 1;
    return part;
}

// A cgroup path as the kernel printed it, up to the next field: Slurm's part (root, uid_, job_)
// holds no ',' and comes first; a job's own sub-cgroups, which may hold ',' and '=', follow it.
void job_in_path(std::string_view path, const std::vector<std::string>& roots, OomKill& k) {
    path = path.substr(0, path.find(','));
    for (std::string_view root : roots) {
        while (root.size() > 1 && root.back() == '/') root.remove_suffix(1);
        if (root.empty() || path.substr(0, root.size()) != root ||
            (path.size() > root.size() && path[root.size()] != '/' && root != "/"))
            continue;
        size_t at = root == "/" ? 1 : root.size() + 1;
        auto part = component(path, at);
        std::string uid;
        if (part.substr(0, 4) == "uid_" && is_digits(part.substr(4))) {
            uid = part.substr(4);
            part = component(path, at);
        }
        if (part.substr(0, 4) == "job_" && node::valid_job_id(part.substr(4))) {
            k.job_id = part.substr(4);
            k.cgroup_uid = std::move(uid);
            return;
        }
    }
    // Named like a job's cgroup, but where anyone may make one: said, never taken.
    for (size_t at = 1; at < path.size();)
        if (const auto part = component(path, at); part.substr(0, 4) == "job_" && node::valid_job_id(part.substr(4))) {
            k.refused = "memory cgroup " + std::string(path) + " is not under Slurm's cgroup root " +
                        "(collector.slurm_cgroup_roots)";
            return;
        }
}

// The kernel's value of `key` ("oom_memcg=") when it holds a path: a field of the kernel's comes
// first, and a name a user chose (cpuset=, a sub-cgroup) cannot hold the '/' that starts a path.
std::optional<std::string_view> path_field(std::string_view m, std::string_view key) {
    for (size_t at = m.find(key); at != std::string_view::npos; at = m.find(key, at + 1)) {
        if (at == 0 || m[at - 1] != ',') continue;
        const auto value = m.substr(at + key.size());
        if (!value.empty() && value[0] == '/') return value;
    }
    return std::nullopt;
}

long parse_pid(std::string_view s) {
    long v = -1;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    return (r.ec == std::errc() && v > 0) ? v : -1;
}

}  // namespace

std::string_view basis_name(Basis b) {
    switch (b) {
        case Basis::kDevice:
            return "device";
        case Basis::kMemcg:
            return "memcg";
        case Basis::kNode:
            break;
    }
    return "node";
}

std::vector<std::string> default_slurm_cgroup_roots() {
    return {"/system.slice/slurmstepd.scope", "/slurm"};
}

OomKill parse_oom_kill(std::string_view m, const std::vector<std::string>& roots) {
    OomKill k;
    if (m.substr(0, 9) != "oom-kill:") return k;
    // task= (a comm the user chose) comes after the cgroup paths: read only what precedes it.
    if (const size_t task = m.find(",task="); task != std::string_view::npos) {
        // The comm may hold ",pid=" itself; the kernel's pid= is the last one (uid= follows).
        if (const size_t last = m.rfind(",pid="); last != std::string_view::npos && last > task) {
            auto rest = m.substr(last + 5);
            k.pid = parse_pid(rest.substr(0, rest.find(',')));
            if (const size_t u = rest.find(",uid="); u != std::string_view::npos) {
                rest = rest.substr(u + 5);
                if (is_digits(rest.substr(0, rest.find(',')))) k.uid = rest.substr(0, rest.find(','));
            }
        }
        m = m.substr(0, task);
    }
    // The cgroup over its limit; a global OOM names none ("global_oom"), only the task's.
    auto memcg = path_field(m, "oom_memcg=");
    if (!memcg) memcg = path_field(m, "task_memcg=");
    if (memcg) job_in_path(*memcg, roots, k);
    return k;
}

long killed_pid(std::string_view m) {
    // Anchored: other kernel lines (audit, a segfault) carry user-chosen text before any words.
    for (std::string_view p : {"Out of memory: Killed process ", "Memory cgroup out of memory: Killed process "}) {
        if (m.substr(0, p.size()) != p) continue;
        auto rest = m.substr(p.size());
        return parse_pid(rest.substr(0, rest.find(' ')));
    }
    if (m.substr(0, 15) == "Out of memory (") {  // "Out of memory (oom_kill_allocating_task): Killed process N"
        const size_t at = m.find("): Killed process ");
        if (at == std::string_view::npos) return -1;
        auto rest = m.substr(at + 18);
        return parse_pid(rest.substr(0, rest.find(' ')));
    }
    return -1;
}

void Attributor::upsert(const std::string& job_id, const std::string& uid, int64_t start_ns, int64_t end_ns,
                        std::vector<node::JobDevice> devices, std::string note) {
    Job& j = jobs_[job_id];
    j.uid = uid;
    j.start_ns = start_ns;
    j.end_ns = end_ns;
    j.keys.clear();
    for (const auto& d : devices) j.keys.push_back(bdf_key(d.bdf));
    j.devices = std::move(devices);
    j.note = std::move(note);
}

const std::vector<node::JobDevice>* Attributor::devices_of(const std::string& job_id) const {
    const auto it = jobs_.find(job_id);
    return it == jobs_.end() ? nullptr : &it->second.devices;
}

std::string Attributor::owner_of(std::string_view pci_bdf, int64_t ts) const {
    const std::string key = bdf_key(pci_bdf);
    std::string owner;
    int64_t start = 0;
    if (key.empty()) return owner;
    for (const auto& [id, j] : jobs_)
        if (running_at(j, ts) && std::find(j.keys.begin(), j.keys.end(), key) != j.keys.end() &&
            (owner.empty() || j.start_ns >= start)) {
            owner = id;
            start = j.start_ns;
        }
    return owner;
}

std::string Attributor::memcg_owner(const OomKill& k, std::string& note) const {
    if (k.job_id.empty()) {
        if (!k.refused.empty()) note = "not attributed: " + k.refused;
        return {};
    }
    // The job must be one this node ran, and the cgroup and the killed task its user's.
    const auto it = jobs_.find(k.job_id);
    if (it == jobs_.end()) {
        note = "not attributed: job " + k.job_id + " of its memory cgroup did not run on this node";
        return {};
    }
    const std::string& uid = it->second.uid;
    if (uid.empty()) {
        note = "not attributed: job " + k.job_id + "'s user is unknown";
        return {};
    }
    for (const auto& [what, v] : {std::pair{"cgroup's uid_", k.cgroup_uid}, std::pair{"kernel's uid=", k.uid}})
        if (!v.empty() && v != uid) {
            note = "not attributed: the " + std::string(what) + v + " is not job " + k.job_id + "'s user (uid " + uid +
                   ")";
            return {};
        }
    return k.job_id;
}

Attribution Attributor::attribute(int64_t ts, std::string_view message, std::string_view pci_bdf) {
    Attribution a;
    for (const auto& [id, j] : jobs_)
        if (running_at(j, ts)) a.running.push_back(id);

    std::string memcg, refused;
    if (const auto k = parse_oom_kill(message, roots_); k.pid > 0 || !k.job_id.empty() || !k.refused.empty()) {
        memcg = memcg_owner(k, refused);
        if (k.pid > 0) {
            oom_pids_.push_back({k.pid, memcg, refused});
            if (oom_pids_.size() > kOomMemory) oom_pids_.pop_front();
        }
    } else if (const long pid = killed_pid(message); pid > 0) {
        for (auto it = oom_pids_.rbegin(); it != oom_pids_.rend(); ++it)
            if (it->pid == pid) {
                memcg = it->job_id;
                refused = it->note;
                break;
            }
    }
    // A memory cgroup is the kernel's word for whose memory it was, even after the job's end
    // was seen.
    if (!memcg.empty()) {
        a.basis = Basis::kMemcg;
        a.owner = memcg;
        return a;
    }
    a.note = refused;

    if (!pci_bdf.empty()) {
        const std::string key = bdf_key(pci_bdf);
        // Two claims on one GPU (a marker left by an epilog that never ran): the latest start.
        const Job* best = nullptr;
        for (const auto& [id, j] : jobs_) {
            if (key.empty() || !running_at(j, ts) || (best && j.start_ns < best->start_ns)) continue;
            for (size_t i = 0; i < j.keys.size(); ++i)
                if (j.keys[i] == key) {
                    best = &j;
                    a.owner = id;
                    a.device = &j.devices[i];
                }
        }
        if (best) {
            a.basis = Basis::kDevice;
            return a;
        }
        std::string unknown;
        for (const auto& [id, j] : jobs_)
            if (running_at(j, ts) && !j.note.empty()) unknown += (unknown.empty() ? "" : ", ") + id + ": " + j.note;
        a.note = std::string(pci_bdf) + " is no running job's device" +
                 (unknown.empty() ? std::string() : " (devices unknown for job " + unknown + ")");
    }
    return a;
}

}  // namespace jobtrail::devices
