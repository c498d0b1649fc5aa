#pragma once

#include <re2/re2.h>

#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/shipper_config.hpp"
#include "devices/attribution.hpp"
#include "node/job_state.hpp"
#include "node/layout.hpp"
#include "shipper/event.hpp"
#include "shipper/internal_events.hpp"
#include "shipper/metrics.hpp"
#include "shipper/stages/nccl_budget.hpp"

namespace jobtrail::shipper {

// The jobs running on this node, from the prolog's markers and the plugin's step records (the
// node contract), refreshed on every pass. Remembers which jobs and steps asked for trace
// capture after their records are gone, and when a job's marker went: a kernel record is
// judged by its own time, and one the shipper reads just after the epilog removed the marker
// still belongs to that job, as does a record on a device the job owned then.
class JobTable {
public:
    using Clock = std::function<int64_t()>;  // realtime ns
    // slurm_cgroup_roots: where Slurm's job cgroups are (devices::default_slurm_cgroup_roots()).
    explicit JobTable(node::Layout layout, Clock now = {},
                      std::vector<std::string> slurm_cgroup_roots = devices::default_slurm_cgroup_roots());
    void refresh();
    // Which job a kernel record concerns (devices/attribution.hpp). message and pci_bdf are
    // empty for a record the kernel did not write itself.
    devices::Attribution attribute(int64_t ts_ns, std::string_view message, std::string_view pci_bdf) {
        return attributor_.attribute(ts_ns, message, pci_bdf);
    }
    // 1 if the step (or, without a record of the step, its job) asked for trace capture, 0 if
    // not, -1 if the job was never seen.
    int traced(const std::string& job_id, const std::string& step = {}) const;
    // The job's user (the uid its marker names); empty if the job was never seen.
    std::string_view uid(const std::string& job_id) const;

private:
    struct Job {
        int64_t start_ns = 0;
        bool traced = false;
        bool running = false;
        bool marker = false;                // seen in this refresh
        int64_t gone_ns = 0;                // when the marker was first missing (0: still there)
        std::map<std::string, bool> steps;  // step -> traced
        std::vector<node::JobDevice> devices;
        std::string devices_note;
        std::string uid;          // the job's user: an OOM kill is the job's only if its task was theirs
        bool attributed = false;  // in attributor_ (running, or ended within kAttributeAfterEnd)
    };
    node::Layout layout_;
    Clock now_;
    std::map<std::string, Job> jobs_;
    devices::Attributor attributor_;
    bool read_ended_ = false;
    struct timespec ended_mtime_ {};
    // The step records as last read, by name, with their inode: a pass reads only the records
    // that are new or written again (the plugin replaces a record), and none while the
    // directory's mtime is unchanged. Twenty thousand records read on every pass took 76% of a
    // core and delayed the kernel's lines by ~2 s.
    void refresh_steps(bool jobs_added);
    struct StepSeen {
        ino_t ino = 0;
        std::optional<node::StepRecord> record;  // absent: not a record (read again if replaced)
    };
    std::map<std::string, StepSeen> steps_;
    struct timespec steps_mtime_ {};
};

// Stages, applied in order to each pass's events: drop blank lines, drop by RE2 rules, drop NCCL
// INFO noise of jobs without trace capture, hold NCCL lines to their user's budget, tag kernel
// records and DCGM events with the job they concern (slurm_job_id), the jobs running then
// (slurm_jobs_running) and how that was decided (attribution: device, memcg or node).
class Stages {
public:
    // Clocks for tests: the budget's (monotonic) and the job table's (realtime).
    Stages(const config::ShipperConfig& cfg, node::Layout layout, Metrics& m, NcclBudget::Clock clock = {},
           JobTable::Clock wall = {},
           std::vector<std::string> slurm_cgroup_roots = devices::default_slurm_cgroup_roots());
    void apply(std::vector<Event>& events);
    // Lines the stages say themselves (a job over its NCCL budget), once per pass.
    void flush(std::vector<Event>& out, bool all = false) { budget_.flush(out, all); }

private:
    // A kernel record or DCGM event: the job it concerns at its time, by the device it names
    // (pci_bdf) or an OOM kill's memory cgroup (message); add_gpu: the owning job's device index
    // as `gpu` (a DCGM event carries DCGM's own).
    void tag_job(Event& e, std::string_view message, std::string_view pci_bdf, bool add_gpu);
    struct Rule {
        std::string name;
        std::unique_ptr<RE2> re;
    };
    bool drop_blank_;
    bool nccl_noise_;
    std::vector<Rule> rules_;
    // At the line's first "NCCL " (after NCCL's [timestamp] host:pid:tid [dev] prefix): its level,
    // not text a message quotes.
    RE2 noise_{R"(^NCCL INFO (Net|Channel|Comm))"};
    JobTable jobs_;
    NcclBudget budget_;
    Drops& drops_;
};

}  // namespace jobtrail::shipper
