#include "forensics/bundle/find_job.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

#include "common/hostlist.hpp"
#include "common/text.hpp"
#include "common/time.hpp"
#include "forensics/logql.hpp"
#include "joblog/format.hpp"
#include "joblog/shipped.hpp"
#include "loki/query_back.hpp"
#include "node/layout.hpp"
#include "process/runner.hpp"

namespace jobtrail::forensics::bundle {
namespace {

constexpr size_t kMaxJobNodes = 16384;          // expand_hostlist's default bound, for all nodelists together
constexpr size_t kMaxPieceRecords = 4'000'000;  // a piece's records held to be read newest first (24 bytes each)

enum class Phase : uint8_t { kOther, kProlog, kEpilog };

// One prolog/epilog record of a piece, small: a piece is read newest first once it is all in.
struct Rec {
    int64_t ts = 0;
    uint32_t node = 0;      // index into the names seen
    int32_t nodelist = -1;  // index into the nodelists seen, for a `meta nodelist=` line
    Phase phase = Phase::kOther;
    bool epilog_end = false;
};

std::string label_of(const loki::QueryEntry& e, const char* k) {
    auto it = e.labels->find(k);
    return it == e.labels->end() ? std::string() : it->second;
}

// "prolog meta nodelist=gpu[01-04]" -> "gpu[01-04]" for key "nodelist"; "" if not such a line.
std::string meta_value(std::string_view line, std::string_view key) {
    const auto l = joblog::parse_shipped_line(line);
    if (l.tag != joblog::kMeta || !l.name.empty()) return {};
    const std::string_view t = l.text;
    if (!starts_with(t, key) || t.size() <= key.size() || t[key.size()] != '=') return {};
    return std::string(t.substr(key.size() + 1, 4096));
}

}  // namespace

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

FoundJob find_job(const BundleOptions& o) {
    FoundJob job;
    Window& w = job.window;
    loki::Client client(o.endpoint);
    if (auto secrets = client.load_secrets(); !secrets.ok)
        std::fprintf(stderr, "jobtrail: %s (querying without those credentials)\n", secrets.error.c_str());
    const int64_t now = realtime_ns();
    // The options' window bounds the search; without one, the lookback.
    const int64_t lo = o.start_ns ? o.start_ns : now - o.lookback_ns;
    const int64_t hi = o.end_ns ? o.end_ns : now + 60'000'000'000;
    Scope scope{o.schema, o.cluster};
    QueryRecord q{"find the job", prolog_epilog_query(scope, o.job_id)};
    const int64_t t0 = monotonic_ns();
    auto fail = [&](int code, std::string why) {
        q.failed = true;
        q.error = why;
        q.seconds = static_cast<double>(monotonic_ns() - t0) / 1e9;
        job.query = q;
        job.exit_code = code;
        job.error = std::move(why);
        return job;
    };
    bool absent = false;  // Loki's index has no record of the job: not looked for line by line
    if (scope.cluster.empty()) {
        // One job id, several clusters (one Loki for all, ids counted from 1 in each): their
        // records must not be merged, and which one is meant is the operator's to say.
        const auto s = loki::series(client, q.logql, lo, hi, o.query);
        if (s.failed)
            return fail(kExitPartial, (s.http_status ? "cannot find job " : "cannot reach Loki to find job ") +
                                          o.job_id + ": " + s.error);
        std::set<std::string> clusters;
        for (const auto& l : s.series) {
            auto it = l.find(node::label::kCluster);
            clusters.insert(it == l.end() ? std::string() : it->second);
        }
        if (clusters.size() > 1) {
            std::string names;
            for (const auto& c : clusters)
                names += (names.empty() ? "" : ", ") + (c.empty() ? std::string("(no cluster label)") : escape_line(c));
            return fail(kExitUsage, "job " + o.job_id + " is in the records of " + std::to_string(clusters.size()) +
                                        " clusters in Loki: " + names +
                                        "; say which with --cluster NAME (or set `cluster` in the config)");
        }
        if (clusters.size() == 1) scope.cluster = *clusters.begin();
        q.logql = prolog_epilog_query(scope, o.job_id);
        absent = clusters.empty();
    }
    job.cluster = scope.cluster;

    // The job's latest run, newest records first. A prolog record older than an epilog record
    // belongs to another job that had the same id: that is where the run starts.
    std::vector<std::string> names, nodelists;
    std::map<std::string, uint32_t> name_index;
    std::set<uint32_t> run_nodes;
    std::set<int32_t> run_nodelists;
    int64_t run_first = 0, run_last = 0, earlier = 0;
    bool seen_prolog = false, epilog_ended = false, boundary = false, flooded = false;
    uint64_t foreign = 0;
    std::vector<Rec> recs;  // the piece's, read newest first once it is all in
    auto on_entry = [&](const loki::QueryEntry& e) {
        if (recs.size() >= kMaxPieceRecords) {  // a flood pushed into the job's stream: said, not held
            flooded = true;
            return;
        }
        // Loki's answer is data: a stream of another cluster is not this job's.
        if (!scope.cluster.empty() && label_of(e, node::label::kCluster) != scope.cluster) {
            ++foreign;
            return;
        }
        Rec rec;
        rec.ts = e.ts_ns;
        const std::string node = label_of(e, node::label::kNode);
        auto [it, fresh] = name_index.emplace(node, static_cast<uint32_t>(names.size()));
        if (fresh) {
            if (names.size() >= kMaxJobNodes) {
                name_index.erase(it);
                return;
            }
            names.push_back(node);
        }
        rec.node = it->second;
        if (auto v = meta_value(e.line, "nodelist"); !v.empty() && nodelists.size() < 16) {
            rec.nodelist = static_cast<int32_t>(nodelists.size());
            nodelists.push_back(v);
        }
        std::string phase = label_of(e, node::metadata::kPhase);
        const auto l = joblog::parse_shipped_line(e.line);
        if (phase.empty()) phase = l.phase;
        rec.phase = phase == node::phase_name(node::Phase::kProlog)   ? Phase::kProlog
                    : phase == node::phase_name(node::Phase::kEpilog) ? Phase::kEpilog
                                                                      : Phase::kOther;
        rec.epilog_end = rec.phase == Phase::kEpilog && l.tag == joblog::kEnd && l.name.empty();
        recs.push_back(rec);
    };
    auto more = [&](int64_t, int64_t) {
        for (auto it = recs.rbegin(); it != recs.rend(); ++it) {
            if (seen_prolog && it->phase == Phase::kEpilog) {
                boundary = true;
                earlier = it->ts;
                break;
            }
            seen_prolog |= it->phase == Phase::kProlog;
            epilog_ended |= it->epilog_end;
            run_nodes.insert(it->node);
            if (it->nodelist >= 0) run_nodelists.insert(it->nodelist);
            if (!run_first || it->ts < run_first) run_first = it->ts;
            run_last = std::max(run_last, it->ts);
        }
        // An empty piece before the job's prolog: nothing older is of this run.
        const bool go_on = !boundary && !(recs.empty() && seen_prolog);
        recs.clear();
        return go_on;
    };
    loki::QueryResult r = loki::query_back(client, q.logql, lo, absent ? lo : hi, o.query, on_entry, more);
    r.truncated |= flooded;
    q.lines = r.entries;
    q.failed = r.failed;
    q.truncated = r.truncated;
    q.error = r.error;
    q.seconds = static_cast<double>(monotonic_ns() - t0) / 1e9;
    job.query = q;
    if (foreign)
        job.nodelist_notes += "Loki answered " + std::to_string(foreign) +
                              " record(s) of other clusters to a query for cluster " + escape_line(scope.cluster) +
                              ": left out\n";
    if (boundary)
        job.nodelist_notes += "an earlier job with id " + o.job_id + " has records up to " +
                              format_rfc3339_ns(earlier) +
                              ": it is another job, left out; give --start and --end around it to bundle that one\n";

    Window found;
    if (!run_nodes.empty()) {
        std::set<std::string> all;
        for (const uint32_t n : run_nodes) all.insert(names[n]);
        // A node whose shipper is down or behind has no records: the nodelist names it.
        std::set<std::string> lists;
        for (const int32_t i : run_nodelists) lists.insert(nodelists[static_cast<size_t>(i)]);
        for (const auto& l : lists) {
            auto expanded = expand_hostlist(l);
            if (!expanded.ok) {
                job.nodelist_notes += "the job's nodelist is unusable (" + escape_line(expanded.error) +
                                      "): its nodes are those with records\n";
                continue;
            }
            // Forged nodelists (anyone who can push) must not multiply the queries: distinct
            // nodes in all, those with records and those named before counted once.
            const auto added = std::count_if(expanded.value.begin(), expanded.value.end(),
                                             [&](const std::string& h) { return !all.count(h); });
            if (all.size() + static_cast<size_t>(added) > kMaxJobNodes) {
                job.nodelist_notes += "the job's nodelists name more than " + std::to_string(kMaxJobNodes) +
                                      " nodes: " + escape_line(l.substr(0, 200)) + " left out\n";
                continue;
            }
            for (auto& h : expanded.value)
                if (all.insert(h).second) job.missing_nodes.insert(h);
        }
        found.nodes.assign(all.begin(), all.end());
        found.start_ns = run_first;
        // Without an epilog's end the job runs (or its node died): its window reaches to now,
        // not to its prolog's last record.
        found.end_ns = epilog_ended ? run_last : 0;
        found.basis =
            lists.empty() ? "prolog/epilog records in Loki" : "prolog/epilog records in Loki and the job's nodelist";
        // Without its prolog in the window the job started earlier; without an epilog's end
        // (running, or its node died) the last record is no end.
        if (seen_prolog) job.job_start_ns = run_first;
        if (epilog_ended) job.job_end_ns = run_last;
    } else if (window_from_slurm(o, found)) {
        job.job_start_ns = found.start_ns;
        job.job_end_ns = found.end_ns;
    } else {
        found = {};
    }
    // Given nodes are the ones asked for; a given window is cut to the job's own.
    w.nodes = o.nodes.empty() ? found.nodes : o.nodes;
    if (!o.nodes.empty()) job.missing_nodes.clear();
    w.start_ns = o.start_ns ? std::max(o.start_ns, job.job_start_ns) : found.start_ns;
    w.end_ns = o.end_ns ? (job.job_end_ns ? std::min(o.end_ns, job.job_end_ns) : o.end_ns) : found.end_ns;
    if (w.end_ns && w.end_ns < w.start_ns) w.end_ns = w.start_ns;
    w.basis = found.basis.empty()
                  ? "options"
                  : found.basis + (o.start_ns || o.end_ns || !o.nodes.empty() ? ", within the options" : "");
    if (w.nodes.empty() || !w.start_ns) {
        job.exit_code = r.failed ? kExitPartial : kExitNotFound;
        job.error =
            r.failed ? (r.http_status ? "cannot find job " + o.job_id + ": " + r.error
                                      : "cannot reach Loki to find job " + o.job_id + ": " + r.error)
                     : "job " + o.job_id + ": no prolog/epilog records in Loki" +
                           (o.start_ns ? std::string(" in the window given")
                                       : " over the last " + std::to_string(o.lookback_ns / 3'600'000'000'000) + " h") +
                           " and no accounting record; give --nodes, --start and --end";
    }
    return job;
}

}  // namespace jobtrail::forensics::bundle
