#include "devices/attribution.hpp"

#include <algorithm>
#include <charconv>

#include "devices/gpus.hpp"
#include "node/layout.hpp"

namespace jobtrail::devices {
namespace {

constexpr size_t kOomMemory = 64;

std::string job_in_path(std::string_view path) {
    size_t from = 0;
    while (from < path.size()) {
        size_t to = path.find('/', from);
        if (to == std::string_view::npos) to = path.size();
        auto part = path.substr(from, to - from);
        part = part.substr(0, part.find(','));  // the next field of the kernel's line
        if (part.size() > 4 && part.substr(0, 4) == "job_" && node::valid_job_id(part.substr(4)))
            return std::string(part.substr(4));
        from = to + 1;
    }
    return {};
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

OomKill parse_oom_kill(std::string_view m) {
    OomKill k;
    if (m.substr(0, 9) != "oom-kill:") return k;
    // task= (a comm the user chose) comes after the cgroup paths: read only what precedes it.
    if (const size_t task = m.find(",task="); task != std::string_view::npos) {
        // The comm may hold ",pid=" itself; the kernel's pid= is the last one (uid= follows).
        if (const size_t last = m.rfind(",pid="); last != std::string_view::npos && last > task) {
            const auto rest = m.substr(last + 5);
            k.pid = parse_pid(rest.substr(0, rest.find(',')));
        }
        m = m.substr(0, task);
    }
    // Slurm's part of a cgroup path comes first; a name a job gave its own sub-cgroup (which may
    // hold ',' and '=') can only follow it.
    size_t at = m.find(",oom_memcg=");
    if (at == std::string_view::npos) at = m.find(",task_memcg=");
    if (at != std::string_view::npos) k.job_id = job_in_path(m.substr(m.find('=', at) + 1));
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

void Attributor::upsert(const std::string& job_id, int64_t start_ns, int64_t end_ns,
                        std::vector<node::JobDevice> devices, std::string note) {
    Job& j = jobs_[job_id];
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

Attribution Attributor::attribute(int64_t ts, std::string_view message, std::string_view pci_bdf) {
    Attribution a;
    for (const auto& [id, j] : jobs_)
        if (running_at(j, ts)) a.running.push_back(id);

    std::string memcg;
    if (const auto k = parse_oom_kill(message); !k.job_id.empty()) {
        memcg = k.job_id;
        if (k.pid > 0) {
            oom_pids_.emplace_back(k.pid, k.job_id);
            if (oom_pids_.size() > kOomMemory) oom_pids_.pop_front();
        }
    } else if (const long pid = killed_pid(message); pid > 0) {
        for (auto it = oom_pids_.rbegin(); it != oom_pids_.rend(); ++it)
            if (it->first == pid) {
                memcg = it->second;
                break;
            }
    }
    // A memory cgroup is the kernel's word for whose memory it was, even after the job's end
    // was seen: the job must only be one this node ran.
    if (!memcg.empty() && jobs_.count(memcg)) {
        a.basis = Basis::kMemcg;
        a.owner = memcg;
        return a;
    }

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
