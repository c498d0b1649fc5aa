#include "forensics/node_sources.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "common/fs.hpp"
#include "common/text.hpp"
#include "forensics/logql.hpp"
#include "joblog/format.hpp"
#include "joblog/kernel_line.hpp"
#include "joblog/shipped.hpp"
#include "loki/query_back.hpp"
#include "node/schema.hpp"

namespace jobtrail::forensics {
namespace {

// Jobs that started up to two days before the window still ran in it.
constexpr int64_t kJobLookbackNs = 2LL * 86'400 * 1'000'000'000;

}  // namespace

int node_from_local(const node::Layout& layout, NodeView& v, int64_t from, int64_t to) {
    struct Rec {
        int64_t ts;
        uint64_t seq;
        std::string message;
    };
    // By seq and time since boot: every epilog after it holds the same record, and after a reboot
    // the kernel numbers its records from 0 again (seq alone would let one boot's hide the other's).
    std::map<std::pair<uint64_t, uint64_t>, Rec> kernel;
    const int64_t job_from = from - kJobLookbackNs;
    int files = 0;
    for (const auto phase : {node::Phase::kProlog, node::Phase::kEpilog}) {
        const std::string dir = layout.job_log_dir(phase);
        std::error_code ec;
        for (const auto& de : std::filesystem::directory_iterator(dir, ec)) {
            const auto parsed = node::parse_job_log(de.path().string());
            if (!parsed || !de.is_regular_file(ec)) continue;
            struct stat st {};
            // A log last written before the jobs' lookback holds nothing of the window.
            if (::stat(de.path().c_str(), &st) != 0 ||
                st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec < job_from)
                continue;
            const auto text = read_small_file(de.path().string(), 64ULL << 20);
            if (!text) continue;
            ++files;
            size_t at = 0;
            while (at < text->size()) {
                size_t nl = text->find('\n', at);
                if (nl == std::string::npos) nl = text->size();
                const std::string_view raw(text->data() + at, nl - at);
                at = nl + 1;
                joblog::Line l;
                if (!joblog::parse_line(raw, l) || l.ts_ns < job_from || l.ts_ns > to) continue;
                if (joblog::is_kernel_tag(l.tag)) {
                    const auto k = joblog::decode_kernel_line(l.text, l.ts_ns);
                    if (!k.record || k.record->facility != 0) continue;
                    if (k.ts_ns >= from && kernel.size() < 1'000'000)
                        kernel[{k.record->seq, k.record->usec}] = Rec{k.ts_ns, k.record->seq, k.record->message};
                    continue;
                }
                v.add_job_line(parsed->job_id, node::phase_name(parsed->phase), l.ts_ns, l.tag, l.name, l.text);
            }
        }
    }
    std::vector<Rec> recs;
    for (auto& [key, r] : kernel) recs.push_back(std::move(r));
    std::stable_sort(recs.begin(), recs.end(), [](const Rec& a, const Rec& b) { return a.ts < b.ts; });
    for (const auto& r : recs) v.add_kernel(r.ts, r.message);
    return files;
}

std::vector<std::string> node_from_loki(loki::Client& client, const Scope& scope, const std::string& node, int64_t from,
                                        int64_t to, const loki::QueryOptions& query, NodeView& v) {
    // Loki's answer is data: each stream's cluster is checked, not assumed from the query.
    // Without one, the first cluster seen is the node's, and any other is named.
    std::string ours_is = scope.cluster;
    std::set<std::string> others;
    uint64_t foreign = 0;
    auto ours = [&](const loki::QueryEntry& e) {
        const auto c = e.labels->find(node::label::kCluster);
        const std::string cluster = c == e.labels->end() ? std::string() : c->second;
        if (ours_is.empty() && scope.cluster.empty() && others.empty()) ours_is = cluster;
        if (cluster == ours_is) return true;
        ++foreign;
        if (others.size() < 16) others.insert(cluster);
        return false;
    };
    auto job_line = [&](const loki::QueryEntry& e) {
        if (!ours(e)) return;
        auto it = e.labels->find(std::string(node::label::kJobId));
        if (it == e.labels->end()) return;
        const auto l = joblog::parse_shipped_line(e.line);
        if (l.phase.empty()) return;
        v.add_job_line(it->second, l.phase, e.ts_ns, l.tag, l.name, l.text);
    };
    // The kernel records that matter to the view, kept until every job is in (the view judges
    // each against the jobs running then); the others go as they come.
    struct Kernel {
        int64_t ts;
        std::string line;
        bool event;
    };
    std::vector<Kernel> kernel;
    auto oldest_first = [&] {
        std::stable_sort(kernel.begin(), kernel.end(), [](const Kernel& x, const Kernel& y) { return x.ts < y.ts; });
    };
    // A flood of them in one piece: the newest are kept, the older events counted.
    auto keep_newest = [&] {
        oldest_first();
        const size_t drop = kernel.size() - NodeView::kMaxEvents;
        v.older_events_not_listed(
            static_cast<uint64_t>(std::count_if(kernel.begin(), kernel.begin() + static_cast<std::ptrdiff_t>(drop),
                                                [](const Kernel& k) { return k.event; })));
        kernel.erase(kernel.begin(), kernel.begin() + static_cast<std::ptrdiff_t>(drop));
    };
    std::vector<std::string> failed;
    // From now back, a day, two, four... (the bundle's stepping): each piece's kernel records,
    // then its jobs' lines; once the view's limits are filled nothing older is asked for. One
    // query in flight: a day is 24 of Loki's 1 h pieces, near its max_query_parallelism (32).
    // Where the index holds neither stream of the node any more, nothing older is asked for.
    const std::string jobs_q = node_jobs_query(scope, node);
    const auto kr = loki::query_back(
        client, kernel_query(scope, node), from, to, query,
        [&](const loki::QueryEntry& e) {
            if (!ours(e)) return;
            const auto use = v.kernel_use(e.line);
            if (use == NodeView::KernelUse::kNone) return;
            kernel.push_back({e.ts_ns, e.line, use == NodeView::KernelUse::kEvent});
            if (kernel.size() >= 2 * NodeView::kMaxEvents) keep_newest();
        },
        [&](int64_t a, int64_t b) {
            const auto jr = loki::query_range(client, jobs_q, a, b, query, job_line);
            if (jr.failed) failed.push_back(jr.error);
            return !jr.failed && kernel.size() < NodeView::kMaxEvents && v.jobs().size() < NodeView::kMaxJobs;
        },
        {stream_selector(scope, node::StreamKind::kKernel, {node}),
         stream_selector(scope, node::StreamKind::kJobLog, {node})});
    if (kr.failed) failed.push_back(kr.error);
    const int64_t looked_from = kr.start_ns;
    if (looked_from > from && failed.empty()) v.not_looked_before(looked_from);
    // Jobs that started up to two days before the first record looked at still ran in it.
    const auto jr = loki::query_range(client, jobs_q, looked_from - kJobLookbackNs, looked_from, query, job_line);
    if (jr.failed) failed.push_back(jr.error);
    // The node's DCGM events over what was looked at: at most the view's limit, the newest.
    struct Dcgm {
        int64_t ts;
        std::string line;
        loki::LabelSet device;  // gpu and pci_bdf: what read_dcgm looks at
    };
    std::vector<Dcgm> dcgm;
    auto newest_dcgm = [&] {
        std::stable_sort(dcgm.begin(), dcgm.end(), [](const Dcgm& x, const Dcgm& y) { return x.ts < y.ts; });
        if (dcgm.size() <= NodeView::kMaxEvents) return;
        const size_t drop = dcgm.size() - NodeView::kMaxEvents;
        v.older_events_not_listed(drop);
        dcgm.erase(dcgm.begin(), dcgm.begin() + static_cast<std::ptrdiff_t>(drop));
    };
    const auto dr =
        loki::query_range(client, dcgm_query(scope, node), looked_from, to, query, [&](const loki::QueryEntry& e) {
            if (!ours(e)) return;
            loki::LabelSet device;
            for (const char* k : {node::metadata::kGpu, node::metadata::kPciBdf})
                if (const auto it = e.labels->find(k); it != e.labels->end()) device.emplace(k, it->second);
            dcgm.push_back({e.ts_ns, e.line, std::move(device)});
            if (dcgm.size() >= 2 * NodeView::kMaxEvents) newest_dcgm();
        });
    if (dr.failed) failed.push_back(dr.error);
    newest_dcgm();
    // Oldest first, as the view judges them, kernel and DCGM events interleaved.
    oldest_first();
    size_t d = 0;
    for (const auto& k : kernel) {
        for (; d < dcgm.size() && dcgm[d].ts < k.ts; ++d) v.add_dcgm(dcgm[d].ts, dcgm[d].line, &dcgm[d].device);
        v.add_kernel(k.ts, k.line);
    }
    for (; d < dcgm.size(); ++d) v.add_dcgm(dcgm[d].ts, dcgm[d].line, &dcgm[d].device);
    if (foreign) {
        std::string names;
        for (const auto& c : others) names += ", " + escape_line(c);
        failed.push_back(scope.cluster.empty()
                             ? "node " + escape_line(node) +
                                   " is in the records of several clusters: " + escape_line(ours_is) + names +
                                   "; only " + escape_line(ours_is) + "'s are shown: say which with --cluster NAME"
                             : "Loki answered " + std::to_string(foreign) + " record(s) of other clusters (" +
                                   names.substr(2) + ") to a query for " + escape_line(scope.cluster) + ": left out");
    }
    return failed;
}

}  // namespace jobtrail::forensics
