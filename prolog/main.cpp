// jobtrail-prolog: Slurm's Prolog=. Records the job's start on this node, then runs the site's
// prolog scripts; its exit status is theirs and nothing else.
#include <csignal>
#include <string>

#include "collector/cli.hpp"
#include "collector/kernel_snapshot.hpp"
#include "collector/scripts.hpp"
#include "collector/session.hpp"
#include "node/job_state.hpp"

namespace jc = jobtrail::collector;

namespace {

void write_job_marker(jc::Session& s) {
    const auto& cc = s.config().collector;
    const jobtrail::node::JobMarker m{s.facts().job_id, s.facts().user,  s.facts().uid,
                                      s.facts().node,   s.facts().trace, s.start_ns()};
    if (auto st = jobtrail::node::write_job_marker(cc.layout(), m); !st.ok)
        s.notice("error", "cannot write job marker: " + st.error);
}

int run(const std::string& config_path) {
    jc::Session s(jc::Phase::kProlog, config_path);
    s.header();
    if (s.facts().valid_job_id()) {
        jc::guarded(s, "kernel mark", [&] { jc::record_kernel_mark(s); });
        jc::guarded(s, "job marker", [&] { write_job_marker(s); });
    }
    jc::guarded(s, "probes", [&] { jc::run_probes(s); });
    const auto scripts = jc::run_site_scripts(s);
    s.footer(scripts.status, "scripts_run=" + std::to_string(scripts.ran) +
                                 (scripts.failed.empty() ? "" : " failed=" + scripts.failed));
    return scripts.status;
}

}  // namespace

int main(int argc, char** argv) {
    return jc::collector_main(argc, argv, "jobtrail-prolog", run);
}
