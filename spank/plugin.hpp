#pragma once

// Internal interface of spank_jobtrail.so: dispatch.cpp holds the only exported symbols and
// calls one file per Slurm context (local.cpp: srun/sbatch/salloc, remote.cpp: slurmstepd,
// slurmd.cpp: slurmd). State lives in plain globals (POD), valid for one process.

extern "C" {
#include <slurm/spank.h>
}

#include <type_traits>

#include "policy.hpp"

namespace jobtrail::spank {

// Parsed plugstack arguments and the user's --trace-capture, for this process.
struct State {
    PluginConfig cfg;
    bool cfg_ok;
    char cfg_error[512];
    TraceRequest trace;
    bool trace_error;
};
static_assert(std::is_trivial_v<State>, "plugin globals must not need constructors");
State& state();

// Parses ac/av into state().cfg (every callback gets them; init is not called everywhere).
void load_config(int ac, char** av);
// Registers --trace-capture in this context.
int register_option(spank_t sp);

int local_init_post_opt(spank_t sp);
int remote_init_post_opt(spank_t sp);
int remote_user_init(spank_t sp);
int slurmd_init(spank_t sp);

}  // namespace jobtrail::spank

// Every message carries the plugin's name. In srun/sbatch only errors for the user are shown;
// the rest goes to debug level so normal submissions stay quiet.
#define JT_ERROR(fmt, ...) slurm_error("jobtrail: " fmt, ##__VA_ARGS__)
#define JT_INFO(fmt, ...) slurm_info("jobtrail: " fmt, ##__VA_ARGS__)
#define JT_DEBUG(fmt, ...) slurm_debug("jobtrail: " fmt, ##__VA_ARGS__)
