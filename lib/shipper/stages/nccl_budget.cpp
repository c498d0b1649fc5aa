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

void NcclBudget::say_dropped(const Budget& b) {
    for (const auto& [stream, d] : b.dropped) {
        Event e;
        e.ts_ns = realtime_ns();
        // The job's stream without a file's metadata: the line is about the whole job.
        e.origin = make_origin(d.stream->labels, {}, d.stream->kind, d.stream->job_id);
        const std::string whose = d.stream->job_id.empty() ? "of stream " + stream : "of job " + d.stream->job_id;
        e.line = "jobtrail dropped " + std::to_string(d.lines) + " NCCL lines (" + std::to_string(d.bytes) +
                 " bytes) " + whose + (b.user ? " over its user's budget of " : " over its budget of ") +
                 bytes_text(budget_) + " per " + duration_text(window_ns_ / 1'000'000) + " on this node" +
                 (b.user ? ", shared by the user's jobs" : "") + " (shipper.stages.nccl_budget)";
        said_.push_back(std::move(e));
    }
}

void NcclBudget::roll(int64_t now, bool all) {
    // Every budget walked at most ten times a window (take() ends its own line's window exactly):
    // an idle job's window is said at most a tenth late.
    if (!all && last_roll_ns_ != 0 && now - last_roll_ns_ < window_ns_ / 10) return;
    last_roll_ns_ = now;
    for (auto it = budgets_.begin(); it != budgets_.end();) {
        Budget& b = it->second;
        if (now - b.window_start_ns < window_ns_ && !(all && !b.dropped.empty())) {
            ++it;
            continue;
        }
        say_dropped(b);
        // A budget unused for a whole window is forgotten; the map holds those of the last one.
        if (b.bytes == 0 && b.dropped.empty()) {
            it = budgets_.erase(it);
            continue;
        }
        b = Budget{now, 0, b.user, {}};
        ++it;
    }
}

bool NcclBudget::take(const Event& e, std::string_view user) {
    if (budget_ == 0) return true;
    const int64_t now = now_();
    roll(now);
    // A Slurm job's lines draw from its user's budget; the others are keyed by the stream they go
    // to: a pod given a job's id, or a file whose name gives no job, has its own, and never spends
    // a Slurm user's.
    const std::string key = user.empty() ? "stream " + e.origin->stream : "user " + std::string(user);
    auto it = budgets_.find(key);
    if (it == budgets_.end()) it = budgets_.emplace(key, Budget{now, 0, !user.empty(), {}}).first;
    Budget& b = it->second;
    // The line's own budget ends its window to the nanosecond, whenever the sweep last ran:
    // a line just past the end is never charged to the window before.
    if (now - b.window_start_ns >= window_ns_) {
        say_dropped(b);
        b = Budget{now, 0, b.user, {}};
    }
    // What Loki counts (the line and its structured metadata), and at least a record's framing:
    // one-byte lines under a long file name are not nearly free.
    uint64_t cost = 32 + e.line.size();
    for (const auto* md : {&e.origin->metadata, &e.metadata})
        for (const auto& [k, v] : *md) cost += k.size() + v.size();
    if (b.bytes + cost <= budget_) {
        b.bytes += cost;
        return true;
    }
    b.bytes = budget_;  // full: later small lines do not slip in
    Dropped& d = b.dropped[e.origin->stream];
    ++d.lines;
    d.bytes += e.line.size();
    d.stream = e.origin;
    drops_("nccl_budget");
    return false;
}

void NcclBudget::flush(std::vector<Event>& out, bool all) {
    if (budget_ != 0) roll(now_(), all);
    for (auto& e : said_) out.push_back(std::move(e));
    said_.clear();
}

}  // namespace jobtrail::shipper
