#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/fs.hpp"
#include "node/layout.hpp"

// The records one jobtrail process leaves for another on a node: one struct each, one writer
// and one reader. Readers never throw on a damaged or foreign file: it reads as absent.
namespace jobtrail::node {

// A device Slurm gave the job, as the prolog resolved it: a kernel record naming its PCI
// address belongs to the job.
struct JobDevice {
    std::string kind;    // "gpu"
    int index = -1;      // the device minor (/dev/nvidia<index>, nvidia-smi's index on most nodes)
    std::string bdf;     // PCI address as the driver prints it, e.g. 0000:3b:00.0
    std::string uuid;    // GPU-...; empty when unknown
    std::string serial;  // from the prolog's nvidia-smi probe; empty when unknown
};

// <run_dir>/jobs/<jobid>: written by the prolog, removed by the epilog. The shipper reads it to
// know which jobs run on the node (kmsg attribution) and which asked for trace capture; the
// plugin reads start_ns to tell a job from an older one with the same id.
struct JobMarker {
    std::string job_id, user, uid, node, trace;
    int64_t start_ns = 0;
    std::vector<JobDevice> devices;
    // Why devices is empty or partial ("SLURM_JOB_GPUS unset", "no driver entry for GPU 3"):
    // readers then attribute device records node-wide, and say so.
    std::string devices_note;
    int64_t end_ns = 0;  // set in <run_dir>/ended/ only: when the epilog ended the job here
};
std::string to_json(const JobMarker& m);
std::optional<JobMarker> parse_job_marker(std::string_view text);
Status write_job_marker(const Layout& l, const JobMarker& m);
std::optional<JobMarker> read_job_marker(const Layout& l, const std::string& job_id);
// Every marker present now (the jobs running on the node).
std::vector<JobMarker> read_job_markers(const Layout& l);

// <run_dir>/steps/<jobid>.<step>: written by the plugin in slurmstepd when a step starts. The
// shipper reads its trace request: a step may ask for trace capture when its job did not.
struct StepRecord {
    std::string job_id, step, trace;
    int64_t start_ns = 0;
    std::string nccl_file;  // NCCL_DEBUG_FILE as set; empty when the step got none
};
std::string to_json(const StepRecord& r);
std::optional<StepRecord> parse_step_record(std::string_view text);
Status write_step_record(const Layout& l, const StepRecord& r);
std::vector<StepRecord> read_step_records(const Layout& l);
// The record in steps/<name>, if it is one and names itself so.
std::optional<StepRecord> read_step_record(const Layout& l, const std::string& name);

// Removes the job marker and the job's step records (the epilog's last act). With end_ns, the
// marker is kept in <run_dir>/ended/ with that end time, for kernel records read late (an hour,
// at most 256 jobs: older ones are removed here).
void remove_job_state(const Layout& l, const std::string& job_id, int64_t end_ns = 0);
// The jobs that ended on this node within the last hour.
std::vector<JobMarker> read_ended_markers(const Layout& l);

// <state_dir>/kmsg-marks/<jobid>: where the kernel ring stood when the job started (prolog),
// read by the epilog.
struct KmsgMark {
    std::string boot_id;
    uint64_t next_seq = 0;  // first sequence number that belongs to the job
    int64_t start_ns = 0;   // wall clock when the mark was taken
};
std::string to_json(const KmsgMark& m);
std::optional<KmsgMark> parse_kmsg_mark(std::string_view text);

}  // namespace jobtrail::node
