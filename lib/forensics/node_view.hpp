#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "devices/attribution.hpp"
#include "events/extractor.hpp"
#include "loki/query_response.hpp"
#include "node/job_state.hpp"

// `jobtrail node <node>`: the node's story for the operator deciding whether to drain it — the
// jobs that ran there with their devices (from their prolog/epilog records), every kernel and
// DCGM event with the job it hit, and the jobs it did not touch.
namespace jobtrail::forensics {

struct NodeJob {
    std::string id, user;
    std::string uid;  // from the prolog's meta uid=: an OOM kill is the job's only if its task was this user's
    int64_t start_ns = 0, end_ns = 0;  // end 0: no epilog end seen (still running, or lost)
    std::vector<node::JobDevice> devices;
    std::string devices_note;
};

struct NodeEvent {
    int64_t ts_ns = 0;
    events::Event event;
    std::string basis;              // device, memcg, node
    std::vector<std::string> jobs;  // the jobs it concerns
    std::string device;             // "GPU 1 (0000:2a:00.0, serial …)" when a job's device
    std::string note;
    std::string line;
    std::string source = "kernel";  // kernel, dcgm
};

class NodeView {
public:
    // slurm_cgroup_roots: where Slurm's job cgroups are (collector.slurm_cgroup_roots).
    explicit NodeView(std::string node,
                      std::vector<std::string> slurm_cgroup_roots = devices::default_slurm_cgroup_roots())
        : node_(std::move(node)), attributor_(std::move(slurm_cgroup_roots)) {}
    // One line of a job's prolog or epilog log (tag, [name], text as the job log has them).
    void add_job_line(const std::string& job_id, std::string_view phase, int64_t ts_ns, std::string_view tag,
                      std::string_view name, std::string_view text);
    // Kernel records in time order, after every job line: each is judged against the jobs. Past
    // kMaxEvents the oldest go (counted): an operator deciding on a drain wants the latest.
    void add_kernel(int64_t ts_ns, std::string_view message);
    // A line of the node's DCGM stream with its entry's labels and structured metadata, in time
    // order with the kernel records: judged against the jobs by its GPU's address (when believed,
    // dcgm_lines.hpp), as a kernel event on that device is; the shipper's attribution metadata
    // is not taken on trust. A line that is not one of DCGM's is no event.
    void add_dcgm(int64_t ts_ns, std::string_view line, const loki::LabelSet* labels);
    // What a kernel record is to add_kernel: an event, the oom-kill line that says whose a
    // killed pid was, or nothing (a long window's need not be kept for it).
    enum class KernelUse : uint8_t { kNone, kContext, kEvent };
    KernelUse kernel_use(std::string_view message) const;
    // Events older than those given to add_kernel, left out before it (a flood): counted.
    void older_events_not_listed(uint64_t n) { dropped_ += n; }
    // Records before ts_ns were not looked for: the newest filled the view's limits.
    void not_looked_before(int64_t ts_ns) { not_looked_before_ = ts_ns; }

    static constexpr size_t kMaxJobs = 10'000;
    static constexpr size_t kMaxEvents = 10'000;
    const std::map<std::string, NodeJob>& jobs() const { return jobs_; }
    const std::deque<NodeEvent>& events() const { return events_; }
    std::string text(int64_t from_ns, int64_t to_ns, const std::string& source) const;
    nlohmann::json json(int64_t from_ns, int64_t to_ns, const std::string& source) const;

private:
    void prepare();
    void push(NodeEvent e);
    std::string node_;
    std::map<std::string, NodeJob> jobs_;
    std::deque<NodeEvent> events_;
    devices::Attributor attributor_;
    events::Extractor extractor_;
    bool prepared_ = false;
    uint64_t dropped_ = 0;  // older events past the cap
    int64_t not_looked_before_ = 0;
};

}  // namespace jobtrail::forensics
