// The plugin's only exported symbols (see spank_jobtrail.lds). Each callback switches on the
// Slurm context and never lets an exception reach Slurm; outside option validation at
// submission, it never returns an error: jobtrail must not fail a job or drain a node.
#include <exception>

#include "plugin.hpp"

extern "C" {
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
extern const unsigned int spank_plugin_version;
SPANK_PLUGIN(jobtrail, 1)
}

namespace js = jobtrail::spank;

namespace {

template <typename F>
int guarded(const char* where, F&& f) {
    try {
        return f();
    } catch (const std::exception& e) {
        JT_ERROR("%s: internal error: %s", where, e.what());
    } catch (...) {
        JT_ERROR("%s: internal error", where);
    }
    return ESPANK_SUCCESS;
}

}  // namespace

extern "C" int slurm_spank_init(spank_t sp, int ac, char** av) {
    return guarded("init", [&] {
        js::load_config(ac, av);
        const int rc = js::register_option(sp);
        if (spank_context() == S_CTX_SLURMD) js::slurmd_init(sp);
        // A registration failure must not stop srun/sbatch/slurmstepd.
        (void)rc;
        return ESPANK_SUCCESS;
    });
}

extern "C" int slurm_spank_init_post_opt(spank_t sp, int ac, char** av) {
    return guarded("init_post_opt", [&] {
        js::load_config(ac, av);
        switch (spank_context()) {
            case S_CTX_LOCAL:
            case S_CTX_ALLOCATOR:
                return js::local_init_post_opt(sp);
            case S_CTX_REMOTE:
                js::remote_init_post_opt(sp);
                return ESPANK_SUCCESS;
            default:
                return ESPANK_SUCCESS;
        }
    });
}

extern "C" int slurm_spank_user_init(spank_t sp, int ac, char** av) {
    return guarded("user_init", [&] {
        js::load_config(ac, av);
        if (spank_context() == S_CTX_REMOTE) js::remote_user_init(sp);
        return ESPANK_SUCCESS;
    });
}
