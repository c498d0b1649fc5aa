// jobtrail-prolog: Slurm's Prolog=. Records the job's start on this node, then runs the site's
// prolog scripts; its exit status is theirs and nothing else.
#include <csignal>
#include <map>
#include <string>
#include <vector>

#include "collector/cli.hpp"
#include "collector/job_devices.hpp"
#include "collector/kernel_snapshot.hpp"
#include "collector/scripts.hpp"
#include "collector/session.hpp"
#include "node/job_state.hpp"

namespace jc = jobtrail::collector;

namespace {

void write_job_marker(jc::Session& s, const jobtrail::devices::Resolution& d) {
    const auto& cc = s.config().collector;
    const jobtrail::node::JobMarker m{s.facts().job_id, s.facts().user,  s.facts().uid,
                                      s.facts().node,   s.facts().trace, s.start_ns(),
                                      d.devices,        d.note,          0};
    if (auto st = jobtrail::node::write_job_marker(cc.layout(), m); !st.ok)
        s.notice("error", "cannot write job marker: " + st.error);
}

int run(const std::string& config_path) {
    jc::Session s(jc::Phase::kProlog, config_path);
    s.header();
    const bool job = s.facts().valid_job_id();
    // The marker goes out first, so the shipper knows the job at once; the devices (driver files
    // and slurmd -G, bounded, and nvidia-smi's serials from the probes) are added after.
    if (job) {
        jc::guarded(s, "kernel mark", [&] { jc::record_kernel_mark(s); });
        jc::guarded(s, "job marker", [&] { write_job_marker(s, {}); });
    }
    std::map<std::string, std::vector<std::string>> probe_out;
    jc::guarded(s, "probes", [&] { probe_out = jc::run_probes(s); });
    if (job && !s.facts().gpus.empty()) {
        jc::guarded(s, "devices", [&] {
            const auto devices = jc::resolve_job_devices(s, probe_out);
            write_job_marker(s, devices);
            jc::log_job_devices(s, devices);
        });
    }
    const auto scripts = jc::run_site_scripts(s);
    s.footer(scripts.status, "scripts_run=" + std::to_string(scripts.ran) +
                                 (scripts.failed.empty() ? "" : " failed=" + scripts.failed));
    return scripts.status;
}

}  // namespace

int main(int argc, char** argv) {
    return jc::collector_main(argc, argv, "jobtrail-prolog", run);
}
