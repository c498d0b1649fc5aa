#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "events/extractor.hpp"
#include "loki/query_response.hpp"

// What a job's records say went wrong: fed every record once, in any order, it keeps only the
// findings (kernel events grouped, script failures, NCCL warning counts), never the records.
namespace jobtrail::forensics {

struct Finding {
    int64_t ts_ns = 0;  // the first occurrence
    std::string node;
    std::string source;  // kmsg, prolog, epilog, nccl, slurmd, fabric-manager, dcgm
    // xid, mlx5, oom, ..., script-failure, nccl-warn, nccl-abort, fm-error; from DCGM: xid (one
    // the kernel ring did not print), dcgm-ecc_dbe, dcgm-thermal... (dcgm::kind_name)
    std::string kind;
    events::Severity severity = events::Severity::kInfo;
    int xid = 0;
    uint64_t count = 0;
    std::string title;  // one line: "Xid 79 on 0000:3b:00: GPU has fallen off the bus"
    std::string action;
    std::string quote;    // the first line as it was
    std::string pci_bdf;  // the device a kernel event names (a DCGM event: its bdf_key, when believed)
    bool dcgm = false;    // a kernel Xid that DCGM reported too (corroborates)
    // For a kernel event naming a device: 1 when it is one the job was given on that node (its
    // prolog's `device` lines), 0 when the job had other devices there (another job's, or none
    // of a job's), -1 when the job's devices there are not known.
    int own_device = -1;
    // -1 before the job started, 1 after it ended (in the bundle's margin), 0 during it or unknown.
    int when = 0;
};

struct JobFacts {
    std::string job_id, user, partition, nodelist, cluster;
    int64_t start_ns = 0, end_ns = 0;          // the bundle's window, margin included
    int64_t job_start_ns = 0, job_end_ns = 0;  // the job's own, when known
    std::vector<std::string> nodes;
    std::map<std::string, std::string> exit_by_node;  // epilog end status per node
};

class Analyzer {
public:
    // `line` as Loki holds it (for job logs: "prolog status[10-site.sh] status=1 ...").
    // when: -1 for a record known to come from before the job (the prolog's kernel context),
    // else 0 (then judged by facts().job_start_ns/job_end_ns, when set before the records come).
    void add(const std::string& node, const std::string& source, int64_t ts_ns, std::string_view line, int when = 0);
    // A line of the node's {job="dcgm"} stream, with its entry's labels and structured metadata
    // (dcgm_lines.hpp: what is believed of them). A DCGM Xid the kernel also printed for the same
    // GPU within kCorroborationWindowNs is not a finding of its own: the kernel's says both saw it.
    void add_dcgm(const std::string& node, int64_t ts_ns, std::string_view line, const loki::LabelSet* labels);
    // Sightings kept per finding for the corroboration; past it, a DCGM Xid counts as not seen
    // by the kernel (said, never hidden).
    static constexpr size_t kMaxSightings = 4096;
    std::vector<Finding> findings() const;  // by time
    // The first fatal finding, else the first error, else the first warning; nullptr if none.
    // Events on a device that was not the job's come after all others, whatever their severity;
    // at each severity, those in the margin before or after the job come after those during it.
    const Finding* likely_cause(const std::vector<Finding>& sorted) const;
    const JobFacts& facts() const { return facts_; }
    JobFacts& facts() { return facts_; }
    std::string summary_text() const;

private:
    Finding& group(const std::string& key, Finding proto, std::string* full_key = nullptr);
    int when_ = 0;  // of the record being added
    events::Extractor extractor_;
    std::map<std::string, Finding> groups_;
    // node|bdf key|xid -> ((time, bdf key), group key) of each kernel Xid line; group key ->
    // times of a DCGM Xid finding's lines.
    std::map<std::string, std::vector<std::pair<std::pair<int64_t, std::string>, std::string>>> kernel_xids_;
    std::map<std::string, std::vector<int64_t>> dcgm_xids_;
    std::map<std::string, std::map<std::string, std::string>> devices_;  // node -> bdf key -> "GPU 1 (…)"
    std::set<std::string> unresolved_;  // nodes where the prolog could not resolve all devices
    JobFacts facts_;
};

}  // namespace jobtrail::forensics
