// jobtrail-epilog: Slurm's Epilog=. Runs the site's epilog scripts, then records what the
// kernel said during the job and summarises it; its exit status is the scripts' (or, only when
// the operator enabled fail_on_xid, a failure that drains the node after a critical Xid).
#include <unistd.h>

#include <algorithm>
#include <string>

#include "collector/cli.hpp"
#include "collector/kernel_snapshot.hpp"
#include "collector/scripts.hpp"
#include "collector/session.hpp"
#include "common/time.hpp"
#include "events/extractor.hpp"
#include "node/job_state.hpp"

namespace jc = jobtrail::collector;

namespace {

// The optional drain policy: the first listed Xid seen during the job, or nullptr.
const jc::EventHit* critical_xid(const std::vector<jc::EventHit>& hits, const std::vector<int>& policy) {
    for (const auto& h : hits)
        if (h.event.kind == "xid" && std::find(policy.begin(), policy.end(), h.event.xid) != policy.end()) return &h;
    return nullptr;
}

int run(const std::string& config_path) {
    jc::Session s(jc::Phase::kEpilog, config_path);
    s.header();
    const auto scripts = jc::run_site_scripts(s);
    jc::guarded(s, "probes", [&] { jc::run_probes(s); });
    int status = scripts.status;
    std::string summary =
        "scripts_run=" + std::to_string(scripts.ran) + (scripts.failed.empty() ? "" : " failed=" + scripts.failed);
    if (s.facts().valid_job_id()) {
        std::vector<jc::EventHit> hits;
        jc::guarded(s, "kernel delta", [&] {
            const jobtrail::events::Extractor ex;
            hits = jc::record_kernel_delta(s, ex);
        });
        if (const auto* h = critical_xid(hits, s.phase_config().fail_on_xid); h && status == 0) {
            status = 1;
            const std::string why = "Xid " + std::to_string(h->event.xid) + " on " + h->event.pci_bdf +
                                    " during the job (" + h->event.meaning + ")";
            s.notice("error",
                     "failing the epilog so Slurm drains the node: " + why + " [policy collector.epilog.fail_on_xid]");
            summary += " drain_reason=\"" + why + "\"";
        }
        // Kept with its end time under ended/: the shipper may read the job's last kernel
        // records after this.
        jobtrail::node::remove_job_state(s.config().collector.layout(), s.facts().job_id, jobtrail::realtime_ns());
    }
    s.footer(status, summary);
    return status;
}

}  // namespace

int main(int argc, char** argv) {
    return jc::collector_main(argc, argv, "jobtrail-epilog", run);
}
