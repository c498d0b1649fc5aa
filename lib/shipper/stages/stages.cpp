#include "shipper/stages/stages.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>

#include "common/time.hpp"
#include "node/job_state.hpp"
#include "node/schema.hpp"

namespace jobtrail::shipper {

namespace {

// How long an ended job still gets the kernel's late records (the ring read back after a
// restart, a slow pass): each kernel record is judged against every job kept.
constexpr int64_t kAttributeAfterEnd = 3600LL * 1'000'000'000;
constexpr size_t kMaxEndedAttributed = 256;

bool is_trace(const std::string& t) {
    return !t.empty() && t != "none";
}

}  // namespace

JobTable::JobTable(node::Layout layout, Clock now, std::vector<std::string> slurm_cgroup_roots)
    : layout_(std::move(layout)),
      now_(now ? std::move(now) : Clock(realtime_ns)),
      attributor_(std::move(slurm_cgroup_roots)) {}

void JobTable::refresh() {
    const size_t known = jobs_.size();
    for (auto& [id, j] : jobs_) j.marker = false;
    for (auto& m : node::read_job_markers(layout_)) {
        Job& j = jobs_[m.job_id];
        j.start_ns = m.start_ns;
        j.traced = is_trace(m.trace);
        j.marker = true;
        j.gone_ns = 0;
        j.devices = std::move(m.devices);
        j.devices_note = std::move(m.devices_note);
        j.uid = std::move(m.uid);
        attributor_.upsert(m.job_id, j.uid, j.start_ns, 0, j.devices, j.devices_note);
        j.attributed = true;
    }
    const int64_t now = now_();
    bool ended = !read_ended_;
    for (auto& [id, j] : jobs_) {
        if (j.running && !j.marker) {
            j.gone_ns = now;
            attributor_.upsert(id, j.uid, j.start_ns, j.gone_ns, j.devices, j.devices_note);
            ended = true;
        }
        j.running = j.marker;
        if (j.attributed && !j.running && j.gone_ns < now - kAttributeAfterEnd) {
            attributor_.erase(id);
            j.attributed = false;
        }
    }
    // The epilog's end time is the job's, not when this pass noticed; and a job that ended
    // while the shipper was down, or within one pass, is still known. Read at start, when a job
    // went, and when the directory changed.
    struct stat st {};
    if (::stat(layout_.ended_dir().c_str(), &st) == 0 &&
        (st.st_mtim.tv_sec != ended_mtime_.tv_sec || st.st_mtim.tv_nsec != ended_mtime_.tv_nsec)) {
        ended_mtime_ = st.st_mtim;
        ended = true;
    }
    if (ended) {
        read_ended_ = true;
        for (auto& m : node::read_ended_markers(layout_)) {
            if (m.end_ns < now - kAttributeAfterEnd) continue;
            Job& j = jobs_[m.job_id];
            if (j.marker) continue;  // the same id running again
            j.start_ns = m.start_ns;
            j.gone_ns = m.end_ns;
            j.devices = std::move(m.devices);
            j.devices_note = std::move(m.devices_note);
            j.uid = std::move(m.uid);
            attributor_.upsert(m.job_id, j.uid, j.start_ns, j.gone_ns, j.devices, j.devices_note);
            j.attributed = true;
        }
        // Each kernel record is judged against every job kept: the last kMaxEndedAttributed only.
        std::vector<std::pair<int64_t, std::string>> gone;
        for (const auto& [id, j] : jobs_)
            if (j.attributed && !j.running) gone.emplace_back(j.gone_ns, id);
        if (gone.size() > kMaxEndedAttributed) {
            std::sort(gone.begin(), gone.end());
            for (size_t i = 0; i + kMaxEndedAttributed < gone.size(); ++i) {
                attributor_.erase(gone[i].second);
                jobs_[gone[i].second].attributed = false;
            }
        }
    }
    refresh_steps(jobs_.size() != known);
    // Forget finished jobs eventually; keep enough to judge their late NCCL lines.
    if (jobs_.size() > 10'000) {
        for (auto it = jobs_.begin(); it != jobs_.end() && jobs_.size() > 5'000;)
            if (it->second.running) {
                ++it;
            } else {
                attributor_.erase(it->first);
                it = jobs_.erase(it);
            }
    }
}

void JobTable::refresh_steps(bool jobs_added) {
    const std::string dir = layout_.steps_dir();
    struct stat st {};
    bool changed = false;
    if (::stat(dir.c_str(), &st) != 0) {
        changed = !steps_.empty();
        steps_.clear();
        steps_mtime_ = {};
    } else if (st.st_mtim.tv_sec != steps_mtime_.tv_sec || st.st_mtim.tv_nsec != steps_mtime_.tv_nsec ||
               realtime_ns() - (static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec) <
                   1'000'000'000) {
        // Within a second of its last change the mtime may not show the next one (a coarse
        // clock): listed again until it is older.
        steps_mtime_ = st.st_mtim;
        std::map<std::string, StepSeen> now;
        if (DIR* d = ::opendir(dir.c_str())) {
            while (const dirent* e = ::readdir(d)) {
                const std::string name = e->d_name;
                if (name == "." || name == "..") continue;
                auto old = steps_.find(name);
                if (old != steps_.end() && old->second.ino == e->d_ino) {
                    now.insert(steps_.extract(old));
                    continue;
                }
                now[name] = {e->d_ino, node::read_step_record(layout_, name)};
                changed = true;
            }
            ::closedir(d);
        }
        changed |= !steps_.empty();  // records gone
        steps_.swap(now);
    }
    if (!changed && !jobs_added) return;
    for (const auto& [name, s] : steps_) {
        if (!s.record) continue;
        auto it = jobs_.find(s.record->job_id);
        if (it != jobs_.end()) it->second.steps[s.record->step] = is_trace(s.record->trace);
    }
}

int JobTable::traced(const std::string& id, const std::string& step) const {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return -1;
    if (auto s = it->second.steps.find(step); s != it->second.steps.end()) return s->second || it->second.traced;
    return it->second.traced ? 1 : 0;
}

std::string_view JobTable::uid(const std::string& id) const {
    auto it = jobs_.find(id);
    return it == jobs_.end() ? std::string_view() : std::string_view(it->second.uid);
}

Stages::Stages(const config::ShipperConfig& cfg, node::Layout layout, Metrics& m, NcclBudget::Clock clock,
               JobTable::Clock wall, std::vector<std::string> slurm_cgroup_roots)
    : drop_blank_(cfg.drop_blank),
      nccl_noise_(cfg.nccl_noise),
      jobs_(std::move(layout), std::move(wall), std::move(slurm_cgroup_roots)),
      budget_(cfg.nccl_budget_bytes, cfg.nccl_budget_window_ms, m, std::move(clock)),
      drops_(m.group<Drops>()) {
    for (const auto& r : cfg.drop) {
        RE2::Options o;
        o.set_log_errors(false);
        rules_.push_back({r.name.empty() ? r.pattern : r.name, std::make_unique<RE2>(r.pattern, o)});
    }
}

void Stages::apply(std::vector<Event>& events) {
    jobs_.refresh();
    for (auto& e : events) {
        if (drop_blank_ && e.line.find_first_not_of(" \t\r") == std::string::npos) {
            e.dropped = true;
            drops_("blank");
            continue;
        }
        for (const auto& r : rules_) {
            if (r.re->ok() && RE2::PartialMatch(e.line, *r.re)) {
                e.dropped = true;
                drops_(r.name);
                break;
            }
        }
        if (e.dropped) continue;
        const Origin& o = *e.origin;
        if (o.kind == node::StreamKind::kNccl) {
            // Unknown jobs keep their lines: dropping is only for jobs known not to trace.
            const size_t level = e.line.find("NCCL ");
            if (nccl_noise_ && !o.job_id.empty() && level != std::string::npos && jobs_.traced(o.job_id, o.step) == 0 &&
                RE2::PartialMatch(std::string_view(e.line).substr(level), noise_)) {
                e.dropped = true;
                drops_("nccl_noise");
            } else if (!budget_.take(e, o.slurm_job ? jobs_.uid(o.job_id) : std::string_view())) {
                e.dropped = true;
            }
        } else if (o.kind == node::StreamKind::kKernel) {
            // Text a root process wrote into the ring is judged by its time only.
            e.kernel_facility ? tag_job(e, e.line, e.pci_bdf, true) : tag_job(e, {}, {}, true);
        } else if (o.kind == node::StreamKind::kDcgm) {
            // DCGM names the GPU itself (its bus id, its own `gpu` already sent); its text is
            // DCGM's, never an OOM kill's.
            tag_job(e, {}, e.pci_bdf, false);
        }
    }
}

void Stages::tag_job(Event& e, std::string_view message, std::string_view pci_bdf, bool add_gpu) {
    const auto a = jobs_.attribute(e.ts_ns, message, pci_bdf);
    if (a.running.empty() && a.owner.empty()) return;
    // The one job it concerns; a node-wide record concerns the only job running, if one is.
    const std::string owner = !a.owner.empty() ? a.owner : (a.running.size() == 1 ? a.running[0] : std::string());
    std::string running;
    for (const auto& id : a.running) running += (running.empty() ? "" : ",") + id;
    if (!owner.empty()) e.metadata.emplace_back(node::metadata::kSlurmJobId, owner);
    if (!running.empty()) e.metadata.emplace_back(node::metadata::kSlurmJobsRunning, running);
    e.metadata.emplace_back(node::metadata::kAttribution, std::string(devices::basis_name(a.basis)));
    if (add_gpu && a.device) e.metadata.emplace_back(node::metadata::kGpu, std::to_string(a.device->index));
}

}  // namespace jobtrail::shipper
