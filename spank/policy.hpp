#pragma once

#include "node/layout.hpp"

// The plugin's decisions, free of Slurm calls so they can be unit-tested: plugstack arguments,
// --trace-capture values, and the NCCL environment of a job step. Everything here is POD or
// built on the stack: the plugin has no static objects with constructors.

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace jobtrail::spank {

enum class Level { kOff = 0, kVersion = 1, kWarn = 2, kInfo = 3, kTrace = 4 };
const char* level_name(Level l);
// "WARN", "info", ... (case-insensitive); "off"/"none" -> kOff. False if unknown.
bool parse_level(const char* s, Level& out);

// What a user's own NCCL_DEBUG in the job environment gets.
enum class UserEnv { kRespect, kCap, kOverride };

constexpr size_t kPathMax = 4096;
constexpr size_t kSubsysMax = 256;

// Plugstack arguments (key=value); trivial type, defaults from default_config().
struct PluginConfig {
    Level nccl_debug;               // nccl_debug=    level for every step (WARN)
    Level trace_level;              // trace_level=   what --trace-capture without a value means (INFO)
    Level max_level;                // max_level=     the most users may ask for (INFO)
    char trace_subsys[kSubsysMax];  // trace_subsys=  default subsystems when tracing (INIT,NET,COLL)
    char nccl_dir[kPathMax];        // nccl_dir=      per-job NCCL debug files (/var/log/slurm/nccl)
    char run_dir[kPathMax];         // run_dir=       step records beside the job markers (/run/jobtrail)
    UserEnv user_env;               // user_env=      respect|cap|override (cap)
    bool timestamps;                // timestamps=    yes|no: timestamp with UTC offset on every line (yes)
};
PluginConfig default_config();

// Parses plugstack arguments strictly: an unknown key or a bad value is an error naming it
// (err). On error the other arguments are still applied and cfg keeps defaults for the bad one.
bool parse_args(int ac, const char* const* av, PluginConfig& cfg, char* err, size_t errlen);

// Trivial type; TraceRequest{} is "not requested".
struct TraceRequest {
    bool requested;
    Level level;
    char subsys[kSubsysMax];  // empty: the site's trace_subsys
};

// A user's value as it may appear in slurmd's log: control characters, backslashes and bytes
// past ASCII as \xNN (a newline cannot forge a log line), at most kLogValueMax bytes of it, then
// "...(N bytes)". Every message carrying a user value goes through it.
inline constexpr size_t kLogValueMax = 64;
std::string log_value(std::string_view v);

// Validates a --trace-capture value: empty/null = the site's trace_level; else
// LEVEL[:SUBSYS,...] with LEVEL one of WARN, INFO, TRACE up to max_level and NCCL subsystem
// names (optionally ^-prefixed). On error, err says what is allowed.
bool parse_trace(const char* optarg, const PluginConfig& cfg, TraceRequest& out, char* err, size_t errlen);

// The value handed to Prolog/Epilog (as SPANK_JOBTRAIL_TRACE): "INFO" or "INFO:NET,COLL".
std::string trace_to_string(const TraceRequest& t);

// Step ids Slurm uses for special steps, as names.
std::string step_name(unsigned long step_id);

struct StepEnvInput {
    const PluginConfig* cfg;
    const TraceRequest* trace;
    std::string job_id;
    std::string step;                  // "0", "batch", ...
    bool nccl_dir_ok = true;           // the per-job directory exists and is the job's
    const char* user_nccl_debug;       // the job's own NCCL_DEBUG, or nullptr
    const char* user_nccl_debug_file;  // the job's own NCCL_DEBUG_FILE, or nullptr
};

// The variables to set in the step's environment (nothing else is touched; TZ never).
std::vector<std::pair<std::string, std::string>> step_env(const StepEnvInput& in);

// The node contract's paths under the plugstack arguments' directories.
node::Layout layout_of(const PluginConfig& cfg);

}  // namespace jobtrail::spank
