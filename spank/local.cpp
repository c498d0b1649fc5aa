// srun (S_CTX_LOCAL), sbatch and salloc (S_CTX_ALLOCATOR): hand the trace request to the job's
// Prolog/Epilog, where slurmd exposes it as SPANK_JOBTRAIL_TRACE.
#include "node/env.hpp"
#include "plugin.hpp"

namespace jobtrail::spank {

int local_init_post_opt(spank_t sp) {
    const State& s = state();
    if (!s.trace.requested) return ESPANK_SUCCESS;
    const std::string value = trace_to_string(s.trace);
    const spank_err_t rc = spank_job_control_setenv(sp, node::env::kTraceControl, value.c_str(), 1);
    if (rc != ESPANK_SUCCESS)
        JT_DEBUG("could not pass the trace request to the prolog: %s", spank_strerror(rc));
    else
        JT_DEBUG("trace capture %s requested", value.c_str());
    return ESPANK_SUCCESS;
}

}  // namespace jobtrail::spank
