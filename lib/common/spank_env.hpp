#pragma once

// Names shared by the SPANK plugin (which sets them) and the collectors and shipper (which read
// them). The plugin calls spank_job_control_setenv("JOBTRAIL_TRACE", ...); slurmd hands it to
// Prolog/Epilog with the SPANK_ prefix.
namespace jobtrail::spank_env {

inline constexpr const char* kTraceControlName = "JOBTRAIL_TRACE";      // as passed to spank_job_control_setenv
inline constexpr const char* kTracePrologVar = "SPANK_JOBTRAIL_TRACE";  // as the Prolog/Epilog see it
inline constexpr const char* kSpankPrefix = "SPANK_";
// What slurmd passes when it was started without the plugin in plugstack (slurm-lab.md §3.12).
inline constexpr const char* kTraceOptionVar = "SPANK__SLURM_SPANK_OPTION_jobtrail_trace_capture";

}  // namespace jobtrail::spank_env
