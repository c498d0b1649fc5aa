#include "shipper/stages/stages.hpp"

#include <filesystem>

#include "collector/state.hpp"
#include "common/fs.hpp"

namespace jobtrail::shipper {

void JobTable::refresh() {
    for (auto& [id, j] : jobs_) j.running = false;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(run_dir_ + "/jobs", ec)) {
        const std::string id = e.path().filename().string();
        auto text = read_small_file(e.path().string(), 4096);
        if (!text) continue;
        auto m = collector::marker_from_json(*text);
        if (!m) continue;
        Job& j = jobs_[id];
        j.start_ns = m->start_ns;
        j.traced = !m->trace.empty() && m->trace != "none";
        j.running = true;
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
        if (j.running && j.start_ns <= ts) out += (out.empty() ? "" : ",") + id;
    return out;
}

int JobTable::traced(const std::string& id) const {
    auto it = jobs_.find(id);
    return it == jobs_.end() ? -1 : (it->second.traced ? 1 : 0);
}

Stages::Stages(const config::ShipperConfig& cfg, std::string run_dir, Metrics& m)
    : drop_blank_(cfg.drop_blank), nccl_noise_(cfg.nccl_noise), jobs_(std::move(run_dir)), m_(m) {
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
        static const std::string kJob = "job", kJobId = "job_id";
        const std::string_view job = e.origin->label(kJob);
        if (job == "nccl" && nccl_noise_) {
            const std::string_view id = e.origin->label(kJobId);
            // Unknown jobs keep their lines: dropping is only for jobs known not to trace.
            if (!id.empty() && jobs_.traced(std::string(id)) == 0 && RE2::PartialMatch(e.line, noise_)) {
                e.dropped = true;
                m_.drop("nccl_noise");
            }
        } else if (job == "kmsg") {
            if (auto ids = jobs_.running_at(e.ts_ns); !ids.empty()) e.metadata.emplace_back("slurm_job_id", ids);
        }
    }
}

}  // namespace jobtrail::shipper
