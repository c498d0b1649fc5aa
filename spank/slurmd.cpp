// slurmd (S_CTX_SLURMD): runs once at slurmd start; says in slurmd's log what policy applies,
// so a bad plugstack line is found before the first job.
#include "plugin.hpp"

namespace jobtrail::spank {

int slurmd_init(spank_t) {
    const State& s = state();
    const PluginConfig& c = s.cfg;
    JT_INFO("policy: nccl_debug=%s trace_level=%s max_level=%s trace_subsys=%s nccl_dir=%s user_env=%s timestamps=%s%s",
            level_name(c.nccl_debug), level_name(c.trace_level), level_name(c.max_level), c.trace_subsys, c.nccl_dir,
            c.user_env == UserEnv::kRespect ? "respect"
            : c.user_env == UserEnv::kCap   ? "cap"
                                            : "override",
            c.timestamps ? "yes" : "no", s.cfg_ok ? "" : " (with configuration errors, see above)");
    return ESPANK_SUCCESS;
}

}  // namespace jobtrail::spank
