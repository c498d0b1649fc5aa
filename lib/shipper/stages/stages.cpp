#include "shipper/stages/stages.hpp"

#include "common/time.hpp"
#include "node/job_state.hpp"

namespace jobtrail::shipper {

namespace {

bool is_trace(const std::string& t) {
    return !t.empty() && t != "none";
}

}  // namespace

JobTable::JobTable(node::Layout layout, Clock now)
    : layout_(std::move(layout)), now_(now ? std::move(now) : Clock(realtime_ns)) {}

void JobTable::refresh() {
    for (auto& [id, j] : jobs_) j.marker = false;
    for (const auto& m : node::read_job_markers(layout_)) {
        Job& j = jobs_[m.job_id];
        j.start_ns = m.start_ns;
        j.traced = is_trace(m.trace);
        j.marker = true;
        j.gone_ns = 0;
    }
    const int64_t now = now_();
    for (auto& [id, j] : jobs_) {
        if (j.running && !j.marker) j.gone_ns = now;
        j.running = j.marker;
    }
    for (const auto& r : node::read_step_records(layout_)) {
        auto it = jobs_.find(r.job_id);
        if (it != jobs_.end()) it->second.steps[r.step] = is_trace(r.trace);
    }
    // Forget finished jobs eventually; keep enough to judge their late NCCL lines.
    if (jobs_.size() > 10'000) {
        for (auto it = jobs_.begin(); it != jobs_.end() && jobs_.size() > 5'000;)
            it = it->second.running ? std::next(it) : jobs_.erase(it);
    }
}

std::string JobTable::running_at(int64_t ts) const {
    std::string out;
    for (const auto& [id, j] : jobs_)
        if (j.start_ns <= ts && (j.running || (j.gone_ns && ts <= j.gone_ns))) out += (out.empty() ? "" : ",") + id;
    return out;
}

int JobTable::traced(const std::string& id, const std::string& step) const {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return -1;
    if (auto s = it->second.steps.find(step); s != it->second.steps.end()) return s->second || it->second.traced;
    return it->second.traced ? 1 : 0;
}

Stages::Stages(const config::ShipperConfig& cfg, node::Layout layout, Metrics& m, NcclBudget::Clock clock,
               JobTable::Clock wall)
    : drop_blank_(cfg.drop_blank),
      nccl_noise_(cfg.nccl_noise),
      jobs_(std::move(layout), std::move(wall)),
      budget_(cfg.nccl_budget_bytes, cfg.nccl_budget_window_ms, m, std::move(clock)),
      m_(m) {
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
            m_.drop("blank");
            continue;
        }
        for (const auto& r : rules_) {
            if (r.re->ok() && RE2::PartialMatch(e.line, *r.re)) {
                e.dropped = true;
                m_.drop(r.name);
                break;
            }
        }
        if (e.dropped) continue;
        const Origin& o = *e.origin;
        if (o.kind == node::Stream::kNccl) {
            // Unknown jobs keep their lines: dropping is only for jobs known not to trace.
            if (nccl_noise_ && !o.job_id.empty() && jobs_.traced(o.job_id, o.step) == 0 &&
                RE2::PartialMatch(e.line, noise_)) {
                e.dropped = true;
                m_.drop("nccl_noise");
            } else if (!budget_.take(e)) {
                e.dropped = true;
            }
        } else if (o.kind == node::Stream::kKernel) {
            if (auto ids = jobs_.running_at(e.ts_ns); !ids.empty()) e.metadata.emplace_back("slurm_job_id", ids);
        }
    }
}

}  // namespace jobtrail::shipper
