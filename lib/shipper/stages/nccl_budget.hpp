#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "shipper/event.hpp"
#include "shipper/metrics.hpp"

namespace jobtrail::shipper {

// How many NCCL line bytes one job's stream may ship from this node per window (a minute by default). A job's user
// decides how much NCCL prints (TRACE on every rank, a debug loop); past the budget its lines are dropped and counted,
// and once its window is over one line in the job's own NCCL stream says how many, so an operator reading the job sees
// the gap rather than a silent hole. The window runs on the shipper's clock, never on the lines' timestamps (the user
// writes those).
class NcclBudget {
public:
    using Clock = std::function<int64_t()>;  // monotonic ns
    // bytes 0: no budget.
    NcclBudget(uint64_t bytes, int64_t window_ms, Metrics& m, Clock now);
    // False if the line is over its job's budget (the caller drops it).
    bool take(const Event& e);
    // The "dropped over its budget" lines of windows that have ended; with all, also of the
    // windows still open (the shipper is stopping: what was dropped is said before it goes).
    void flush(std::vector<Event>& out, bool all = false);

private:
    struct Job {
        int64_t window_start_ns = 0;
        uint64_t bytes = 0;
        uint64_t dropped_lines = 0, dropped_bytes = 0;
        std::shared_ptr<const Origin> stream;  // where the job's drop line goes
    };
    void roll(int64_t now, bool all = false);

    uint64_t budget_;
    int64_t window_ns_;
    Drops& drops_;
    Clock now_;
    int64_t last_roll_ns_ = 0;
    std::map<std::string, Job, std::less<>> jobs_;
    std::vector<Event> said_;
};

}  // namespace jobtrail::shipper
