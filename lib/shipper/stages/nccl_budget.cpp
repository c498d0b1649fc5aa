#include "shipper/stages/nccl_budget.hpp"

#include <algorithm>

#include "common/time.hpp"

namespace jobtrail::shipper {
namespace {

std::string duration_text(int64_t ms) {
    for (auto [unit, div] : {std::pair{"h", 3'600'000LL}, {"m", 60'000LL}, {"s", 1'000LL}})
        if (ms >= div && ms % div == 0) return std::to_string(ms / div) + unit;
    return std::to_string(ms) + "ms";
}

std::string bytes_text(uint64_t b) {
    for (auto [unit, div] : {std::pair{"GiB", 1ULL << 30}, {"MiB", 1ULL << 20}, {"KiB", 1ULL << 10}})
        if (b >= div && b % div == 0) return std::to_string(b / div) + unit;
    return std::to_string(b) + " bytes";
}

}  // namespace

NcclBudget::NcclBudget(uint64_t bytes, int64_t window_ms, Metrics& m, Clock now)
    : budget_(bytes),
      window_ns_(std::max<int64_t>(1, window_ms) * 1'000'000),
      drops_(m.group<Drops>()),
      now_(now ? std::move(now) : Clock(monotonic_ns)) {}

void NcclBudget::roll(int64_t now, bool all) {
    // Ten times a window is enough: a window is said at most a tenth late.
    if (!all && last_roll_ns_ != 0 && now - last_roll_ns_ < window_ns_ / 10) return;
    last_roll_ns_ = now;
    for (auto it = jobs_.begin(); it != jobs_.end();) {
        Job& j = it->second;
        if (now - j.window_start_ns < window_ns_ && !(all && j.dropped_lines)) {
            ++it;
            continue;
        }
        if (j.dropped_lines) {
            Event e;
            e.ts_ns = realtime_ns();
            // The job's stream without a file's metadata: the line is about the whole job.
            e.origin = make_origin(j.stream->labels, {}, j.stream->kind, j.stream->job_id);
            const std::string whose =
                j.stream->job_id.empty() ? "of stream " + j.stream->stream : "of job " + j.stream->job_id;
            e.line = "jobtrail dropped " + std::to_string(j.dropped_lines) + " NCCL lines (" +
                     std::to_string(j.dropped_bytes) + " bytes) " + whose + " over its budget of " +
                     bytes_text(budget_) + " per " + duration_text(window_ns_ / 1'000'000) +
                     " on this node (shipper.stages.nccl_budget)";
            said_.push_back(std::move(e));
        }
        // A job quiet for a whole window is forgotten; the map holds the jobs of the last one.
        if (j.bytes == 0 && j.dropped_lines == 0) {
            it = jobs_.erase(it);
            continue;
        }
        j = Job{now, 0, 0, 0, std::move(j.stream)};
        ++it;
    }
}

bool NcclBudget::take(const Event& e) {
    if (budget_ == 0) return true;
    const int64_t now = now_();
    roll(now);
    // Keyed by the stream the lines go to: a job's NCCL files share theirs ({job="nccl",
    // job_id=...}); a pod given a job's id, or a file whose name gives no job, has its own, and never
    // spends a Slurm job's.
    const std::string& key = e.origin->stream;
    auto it = jobs_.find(key);
    if (it == jobs_.end()) it = jobs_.emplace(key, Job{now, 0, 0, 0, e.origin}).first;
    Job& j = it->second;
    // What Loki counts (the line and its structured metadata), and at least a record's framing:
    // one-byte lines under a long file name are not nearly free.
    uint64_t cost = 32 + e.line.size();
    for (const auto* md : {&e.origin->metadata, &e.metadata})
        for (const auto& [k, v] : *md) cost += k.size() + v.size();
    if (j.bytes + cost <= budget_) {
        j.bytes += cost;
        return true;
    }
    j.bytes = budget_;  // full: later small lines do not slip in
    ++j.dropped_lines;
    j.dropped_bytes += e.line.size();
    j.stream = e.origin;
    drops_("nccl_budget");
    return false;
}

void NcclBudget::flush(std::vector<Event>& out, bool all) {
    if (budget_ != 0) roll(now_(), all);
    for (auto& e : said_) out.push_back(std::move(e));
    said_.clear();
}

}  // namespace jobtrail::shipper
