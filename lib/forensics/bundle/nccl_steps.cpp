#include "forensics/bundle/nccl_steps.hpp"

#include <algorithm>
#include <iterator>

#include "node/nccl_file.hpp"

namespace jobtrail::forensics::bundle {

bool NcclSteps::usable(const std::string& step) {
    return node::plain_name_part(step) && step != kUnknown;
}

void NcclSteps::add(const loki::QueryEntry& e, const std::string& step, const std::string& file) {
    if (!usable(step) || kept_ >= kMax) return;
    std::string key;
    if (!file.empty()) {
        // A line that did not say where it came from carries its file's name.
        const auto f = node::parse_nccl_file(file);
        if (!f || !node::plain_name_part(f->host) || !node::plain_name_part(f->pid)) return;
        key = f->host + ":" + f->pid;
    } else if (const auto o = node::nccl_line_origin(e.line)) {
        key = std::string(o->host) + ":" + std::string(o->pid);
    } else {
        return;
    }
    auto& said = by_process_[key];
    if (!said.empty() && said.back().second == step && said.back().first <= e.ts_ns) return;
    said.emplace_back(e.ts_ns, step);
    ++kept_;
}

void NcclSteps::done() {
    for (auto& [k, said] : by_process_) std::stable_sort(said.begin(), said.end(), by_time);
}

std::string NcclSteps::step_of(std::string_view host, std::string_view pid, int64_t ts) const {
    const auto it = by_process_.find(std::string(host) + ":" + std::string(pid));
    if (it == by_process_.end() || it->second.empty()) return kUnknown;
    const auto& said = it->second;
    auto at = std::upper_bound(said.begin(), said.end(), std::make_pair(ts, std::string()), by_time);
    return at == said.begin() ? at->second : std::prev(at)->second;
}

}  // namespace jobtrail::forensics::bundle
