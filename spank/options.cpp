// Plugstack arguments and the --trace-capture option, shared by every context.
#include <cstring>

#include "plugin.hpp"

namespace jobtrail::spank {
namespace {

// Trivial types: nothing runs at load time.
State g_state;
bool g_loaded = false;

int trace_cb(int, const char* optarg, int remote) {
    State& s = state();
    char err[512] = "";
    TraceRequest t{};
    if (!parse_trace(optarg, s.cfg, t, err, sizeof err)) {
        s.trace_error = true;
        if (!remote) {
            // The one place jobtrail may refuse: at submission, with what is allowed.
            JT_ERROR("%s", err);
            return -1;
        }
        JT_ERROR("ignoring --trace-capture in the job step: %s", err);
        return 0;
    }
    s.trace = t;  // idempotent: srun steps call this twice
    return 0;
}

char g_opt_name[] = "trace-capture";
char g_opt_arginfo[] = "LEVEL[:SUBSYS,...]";
char g_opt_usage[] =
    "[jobtrail] Capture NCCL debug output of this job at LEVEL (WARN, INFO or TRACE, up to the site's maximum; "
    "default: the site's trace level), optionally only for the given NCCL subsystems, e.g. INFO:NET,COLL. "
    "The logs go to Loki with the job's id.";

}  // namespace

State& state() {
    return g_state;
}

void load_config(int ac, char** av) {
    if (g_loaded) return;
    g_loaded = true;
    g_state.cfg = default_config();
    g_state.cfg_ok = parse_args(ac, av, g_state.cfg, g_state.cfg_error, sizeof g_state.cfg_error);
    if (!g_state.cfg_ok) {
        // Visible in slurmd's log (remote, slurmd); at debug level for srun/sbatch users.
        if (spank_context() == S_CTX_LOCAL || spank_context() == S_CTX_ALLOCATOR)
            JT_DEBUG("plugstack.conf: %s; using defaults for it", g_state.cfg_error);
        else
            JT_ERROR("plugstack.conf: %s; using defaults for it", g_state.cfg_error);
    }
}

int register_option(spank_t sp) {
    struct spank_option opt;
    std::memset(&opt, 0, sizeof opt);
    opt.name = g_opt_name;
    opt.arginfo = g_opt_arginfo;
    opt.usage = g_opt_usage;
    opt.has_arg = 2;  // optional value
    opt.val = 0;
    opt.cb = trace_cb;
    const spank_err_t rc = spank_option_register(sp, &opt);
    if (rc != ESPANK_SUCCESS) JT_ERROR("could not register --%s: %s", g_opt_name, spank_strerror(rc));
    return rc;
}

}  // namespace jobtrail::spank
