#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "shipper/event.hpp"
#include "shipper/metrics.hpp"

namespace jobtrail::shipper {

// How many NCCL line bytes one user's jobs may ship from this node per window (a minute by default). A job's user
// decides how much NCCL prints (TRACE on every rank, a debug loop); past the budget the lines are dropped and counted,
// and once the window is over one line in each job's own NCCL stream says how many of its lines went, so an operator
// reading the job sees the gap rather than a silent hole. The budget is the user's share, not a job's: a user running
// five jobs here gets one budget, as with one job, and never another user's. Lines whose user is not known (a job
// whose marker is not read yet, a pod, a file whose name gives no job) have their stream's own budget. The window runs
// on the shipper's clock, never on the lines' timestamps (the user writes those).
class NcclBudget {
public:
    using Clock = std::function<int64_t()>;  // monotonic ns
    // bytes 0: no budget.
    NcclBudget(uint64_t bytes, int64_t window_ms, Metrics& m, Clock now);
    // False if the line is over its budget (the caller drops it). user: the Slurm job's user (the
    // uid its marker names) whose budget the line draws from; empty: its stream's own.
    bool take(const Event& e, std::string_view user = {});
    // The "dropped over its budget" lines of windows that have ended; with all, also of the
    // windows still open (the shipper is stopping: what was dropped is said before it goes).
    void flush(std::vector<Event>& out, bool all = false);

private:
    struct Dropped {
        uint64_t lines = 0, bytes = 0;
        std::shared_ptr<const Origin> stream;  // where the drop line goes
    };
    struct Budget {
        int64_t window_start_ns = 0;
        uint64_t bytes = 0;
        bool user = false;                                    // a user's, shared by their jobs
        std::map<std::string, Dropped, std::less<>> dropped;  // by stream: each job says its own
    };
    void roll(int64_t now, bool all = false);
    void say_dropped(const Budget& b);  // its "dropped over its budget" lines, one per stream

    uint64_t budget_;
    int64_t window_ns_;
    Drops& drops_;
    Clock now_;
    int64_t last_roll_ns_ = 0;
    std::map<std::string, Budget, std::less<>> budgets_;  // by user or stream
    std::vector<Event> said_;
};

}  // namespace jobtrail::shipper
