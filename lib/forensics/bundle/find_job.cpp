#include "forensics/bundle/find_job.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "common/hostlist.hpp"
#include "common/text.hpp"
#include "common/time.hpp"
#include "forensics/logql.hpp"
#include "joblog/format.hpp"
#include "joblog/shipped.hpp"
#include "node/layout.hpp"
#include "process/runner.hpp"

namespace jobtrail::forensics::bundle {
namespace {

constexpr size_t kMaxJobNodes = 16384;  // expand_hostlist's default bound, for all nodelists together

// "prolog meta nodelist=gpu[01-04]" -> "gpu[01-04]" for key "nodelist"; "" if not such a line.
std::string meta_value(std::string_view line, std::string_view key) {
    const auto l = joblog::parse_shipped_line(line);
    if (l.tag != joblog::kMeta || !l.name.empty()) return {};
    const std::string_view t = l.text;
    if (!starts_with(t, key) || t.size() <= key.size() || t[key.size()] != '=') return {};
    return std::string(t.substr(key.size() + 1, 4096));
}

bool window_from_slurm(const BundleOptions& o, Window& w) {
    const char* env_path = std::getenv("PATH");
    const std::string path = env_path ? env_path : "/usr/bin:/bin";
    const std::string sacct = o.sacct.find('/') == std::string::npos ? process::find_in_path(o.sacct, path) : o.sacct;
    if (sacct.empty()) return false;
    process::RunOptions ro;
    ro.timeout_ms = 15'000;
    ro.env = {"SLURM_TIME_FORMAT=%s", "PATH=/usr/bin:/bin"};
    std::string out;
    process::run({sacct, "-j", o.job_id, "-X", "-n", "-P", "-o", "Start,End,NodeList"}, ro,
                 [&](process::Stream s, int64_t, std::string_view l) {
                     if (s == process::Stream::kStdout && out.empty()) out = std::string(l);
                 });
    // "1795989142|1795989342|gpu[01-02]"
    const size_t a = out.find('|'), b = a == std::string::npos ? a : out.find('|', a + 1);
    if (b == std::string::npos) return false;
    const int64_t start = std::atoll(out.substr(0, a).c_str());
    int64_t end = std::atoll(out.substr(a + 1, b - a - 1).c_str());
    const std::string nodelist = out.substr(b + 1);
    if (start <= 0 || nodelist.empty() || nodelist == "None assigned") return false;
    if (end <= 0) end = realtime_ns() / 1'000'000'000;  // still running
    const std::string scontrol = process::find_in_path(o.scontrol, path);
    std::vector<std::string> nodes;
    if (!scontrol.empty()) {
        process::run({scontrol, "show", "hostnames", nodelist}, ro,
                     [&](process::Stream s, int64_t, std::string_view l) {
                         if (s == process::Stream::kStdout && !l.empty()) nodes.emplace_back(l);
                     });
    }
    if (nodes.empty()) nodes.push_back(nodelist);
    w.nodes = nodes;
    w.start_ns = start * 1'000'000'000;
    w.end_ns = end * 1'000'000'000;
    w.basis = "sacct";
    return true;
}

}  // namespace

FoundJob find_job(const BundleOptions& o) {
    FoundJob job;
    Window& w = job.window;
    w.nodes = o.nodes;
    w.start_ns = o.start_ns;
    w.end_ns = o.end_ns;
    job.end_known = o.end_ns != 0;
    if (!w.nodes.empty() && w.start_ns) {
        w.basis = "options";
        return job;
    }
    Window found;
    bool epilog_ended = false;
    std::set<std::string> nodes;
    std::set<std::string> nodelists;  // what SLURM_JOB_NODELIST said on each node
    loki::Client client(o.endpoint);
    if (auto secrets = client.load_secrets(); !secrets.ok)
        std::fprintf(stderr, "jobtrail: %s (querying without those credentials)\n", secrets.error.c_str());
    const int64_t now = realtime_ns();
    QueryRecord q{"find the job", prolog_epilog_query(o.schema, o.job_id)};
    const auto r = loki::query_range(
        client, q.logql, now - o.lookback_ns, now + 60'000'000'000, o.query, [&](const loki::QueryEntry& e) {
            if (auto it = e.labels->find("node"); it != e.labels->end()) nodes.insert(it->second);
            if (auto v = meta_value(e.line, "nodelist"); !v.empty() && nodelists.size() < 16) nodelists.emplace(v);
            if (auto it = e.labels->find("cluster"); it != e.labels->end()) job.cluster = it->second;
            if (!found.start_ns || e.ts_ns < found.start_ns) found.start_ns = e.ts_ns;
            found.end_ns = std::max(found.end_ns, e.ts_ns);
            const auto l = joblog::parse_shipped_line(e.line);
            if (l.phase == node::phase_name(node::Phase::kEpilog) && l.tag == joblog::kEnd && l.name.empty())
                epilog_ended = true;
        });
    q.lines = r.entries;
    q.failed = r.failed;
    q.error = r.error;
    job.query = q;
    if (!nodes.empty()) {
        // A node whose shipper is down or behind has no records: the nodelist names it.
        std::set<std::string> all = nodes;
        for (const auto& l : nodelists) {
            auto expanded = expand_hostlist(l);
            if (!expanded.ok) {
                job.nodelist_notes += "the job's nodelist is unusable (" + escape_line(expanded.error) +
                                      "): its nodes are those with records\n";
                continue;
            }
            // Forged nodelists (anyone who can push) must not multiply the queries.
            if (all.size() + expanded.value.size() > kMaxJobNodes) {
                job.nodelist_notes += "the job's nodelists name more than " + std::to_string(kMaxJobNodes) +
                                      " nodes: " + escape_line(l.substr(0, 200)) + " left out\n";
                continue;
            }
            for (auto& h : expanded.value)
                if (all.insert(h).second) job.missing_nodes.insert(h);
        }
        found.nodes.assign(all.begin(), all.end());
        found.basis = nodelists.empty() ? "prolog/epilog records in Loki"
                                        : "prolog/epilog records in Loki and the job's nodelist";
    } else if (!window_from_slurm(o, found)) {
        found = {};
    }
    if (w.nodes.empty()) w.nodes = found.nodes;
    if (!w.start_ns) {
        w.start_ns = found.start_ns;
        w.end_ns = found.end_ns;
        // Without an epilog's end (running, or its node died) the last record is no end.
        job.end_known = epilog_ended || (nodes.empty() && found.end_ns);
    }
    w.basis = found.basis.empty() ? "options" : found.basis;
    if (w.nodes.empty() || !w.start_ns) {
        job.exit_code = r.failed ? kExitPartial : kExitNotFound;
        job.error = r.failed ? (r.http_status ? "cannot find job " + o.job_id + ": " + r.error
                                              : "cannot reach Loki to find job " + o.job_id + ": " + r.error)
                             : "job " + o.job_id + ": no prolog/epilog records in Loki over the last " +
                                   std::to_string(o.lookback_ns / 3'600'000'000'000) +
                                   " h and no accounting record; give --nodes, --start and --end";
    }
    return job;
}

}  // namespace jobtrail::forensics::bundle
