#pragma once

// Environment variable names that cross process boundaries: what the SPANK plugin sets for job
// steps, and what slurmd hands to the Prolog/Epilog from it.
namespace jobtrail::node::env {

// The plugin calls spank_job_control_setenv(kTraceControl, ...); slurmd hands it to the
// Prolog/Epilog with the SPANK_ prefix, as kTraceProlog.
inline constexpr const char* kTraceControl = "JOBTRAIL_TRACE";
inline constexpr const char* kTraceProlog = "SPANK_JOBTRAIL_TRACE";
inline constexpr const char* kSpankPrefix = "SPANK_";
// What slurmd passes when it was started without the plugin in plugstack (slurm-lab.md §3.12).
inline constexpr const char* kTraceOption = "SPANK__SLURM_SPANK_OPTION_jobtrail_trace_capture";

// Set in every job step by the plugin.
inline constexpr const char* kStepJobId = "JOBTRAIL_JOB_ID";
inline constexpr const char* kStepStepId = "JOBTRAIL_STEP_ID";
inline constexpr const char* kStepTrace = kTraceControl;  // the step's trace request, when there is one

}  // namespace jobtrail::node::env
