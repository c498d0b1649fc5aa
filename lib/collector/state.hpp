#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace jobtrail::collector {

// /run/jobtrail/jobs/<jobid>: written by the prolog, removed by the epilog. The shipper reads it
// to know which jobs run on the node (kmsg tagging) and which asked for trace capture.
struct JobMarker {
    std::string job_id, user, uid, node, trace;
    int64_t start_ns = 0;
};

std::string job_marker_path(const std::string& run_dir, const std::string& job_id);
// The SPANK plugin's step records: <run_dir>/steps/<jobid>.<step>.
std::string step_records_dir(const std::string& run_dir);
// Removes the job marker and the job's step records (the epilog's last act).
void remove_job_state(const std::string& run_dir, const std::string& job_id);
std::string marker_to_json(const JobMarker& m);
std::optional<JobMarker> marker_from_json(const std::string& text);

// <state_dir>/kmsg-marks/<jobid>: where the kernel ring stood when the job started.
struct KmsgMark {
    std::string boot_id;
    uint64_t next_seq = 0;  // first sequence number that belongs to the job
    int64_t start_ns = 0;   // wall clock when the mark was taken
};

std::string kmsg_mark_path(const std::string& state_dir, const std::string& job_id);
std::string mark_to_json(const KmsgMark& m);
std::optional<KmsgMark> mark_from_json(const std::string& text);

}  // namespace jobtrail::collector
