// jobtrail: the operator's commands. `bundle` gathers a job's forensic bundle, `xid` shows the
// fleet's Xid events, `node` a node's jobs and the kernel events that hit them, `logql` prints a
// job's queries for Grafana. Exit codes: 0 found, 1 not
// found, 2 usage error, 3 partial result (some queries failed), 4 error.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "common/text.hpp"
#include "common/time.hpp"
#include "config/config.hpp"
#include "forensics/bundle.hpp"
#include "forensics/logql.hpp"
#include "forensics/node_sources.hpp"
#include "forensics/node_view.hpp"
#include "forensics/xid_search.hpp"
#include "jobtrail/version.hpp"
#include "loki/query_back.hpp"
#include "node/layout.hpp"
#include "node/schema.hpp"
#include "shipper/sources/registry.hpp"

using namespace jobtrail;

namespace {

struct Common {
    std::string config, loki_url, tenant, cluster;
    std::string max_query_length = "721h", max_query_lookback, split_interval = "1h";
    int max_query_parallelism = 32;
    bool json = false;
    loki::QueryOptions query;
    int64_t split_interval_ns = 0;
};

// Loki's query limits as the operator gave them; false (and a message) if malformed.
bool query_limits(Common& f) {
    const auto len = parse_duration_ms(f.max_query_length);
    const auto back =
        f.max_query_lookback.empty() ? std::optional<int64_t>(0) : parse_duration_ms(f.max_query_lookback);
    if (!len || *len <= 0 || !back) {
        std::fprintf(stderr, "jobtrail: --max-query-length and --max-query-lookback take durations (721h, 90d)\n");
        return false;
    }
    const auto split = parse_duration_ms(f.split_interval);
    if (!split || *split < 60'000) {
        std::fprintf(stderr, "jobtrail: --split-queries-by-interval takes a duration of a minute or more (1h)\n");
        return false;
    }
    f.split_interval_ns = *split * 1'000'000;
    f.query.max_query_length_ns = *len * 1'000'000;
    f.query.max_query_lookback_ns = *back * 1'000'000;
    return true;
}

loki::Endpoint endpoint(const config::Config& c, const Common& f) {
    loki::Endpoint e = config::loki_endpoint(c.shipper);
    e.timeout_ms = std::max<int64_t>(e.timeout_ms, 30'000);  // queries take longer than pushes
    if (!f.loki_url.empty()) e.url = f.loki_url;
    if (!f.tenant.empty()) e.tenant = f.tenant;
    return e;
}

bool load(const Common& f, config::Config& out) {
    const auto r = config::load_config(config::resolve_config_path(f.config), shipper::source_sections());
    for (const auto& e : r.errors) std::fprintf(stderr, "jobtrail: %s\n", e.text().c_str());
    out = r.config;
    return r.errors.empty() || r.file_missing;
}

// Whose records a query asks for: the site's `job` values, and one cluster: --cluster, else the
// config's `cluster` (what this site's shippers put in the label); empty when neither says.
forensics::Scope scope(const config::Config& c, const Common& f) {
    return {config::stream_schema(c.shipper), f.cluster.empty() ? c.cluster : f.cluster};
}

std::optional<int64_t> parse_when(const std::string& s) {
    if (s.empty()) return 0;
    if (auto t = parse_rfc3339_ns(s)) return t;
    if (auto d = parse_duration_ms(s)) return realtime_ns() - *d * 1'000'000;  // "2h": that long ago
    return std::nullopt;
}

std::vector<std::string> split_nodes(const std::string& s) {
    std::vector<std::string> out;
    size_t at = 0;
    while (at <= s.size() && !s.empty()) {
        const size_t c = s.find(',', at);
        out.push_back(s.substr(at, c == std::string::npos ? std::string::npos : c - at));
        if (c == std::string::npos) break;
        at = c + 1;
    }
    return out;
}

int cmd_bundle(const Common& f, const std::string& job, const std::string& nodes, const std::string& start,
               const std::string& end, const std::string& margin, const std::string& lookback, bool local,
               const std::string& nccl_dir, const std::string& out_dir, int parallel, const std::string& cmdline) {
    // Before anything else: the id becomes file names and queries.
    if (!node::valid_job_id(job)) {
        std::fprintf(stderr,
                     "jobtrail: bad job id \"%s\": want the numeric Slurm job id (for an array or het job "
                     "component, its raw id: squeue -o %%A, sacct -o JobIDRaw)\n",
                     escape_line(job).c_str());
        return forensics::kExitUsage;
    }
    config::Config c;
    if (!load(f, c)) return forensics::kExitUsage;
    forensics::BundleOptions o;
    o.job_id = job;
    o.nodes = split_nodes(nodes);
    // Flags left out take the site's defaults from the config's cli section.
    const auto s = parse_when(start), e = parse_when(end);
    const auto m = margin.empty() ? c.cli.margin_ms : parse_duration_ms(margin);
    const auto lb = lookback.empty() ? c.cli.lookback_ms : parse_duration_ms(lookback);
    if (!s || !e || !m || !lb) {
        std::fprintf(stderr,
                     "jobtrail: --start/--end take RFC 3339 times or durations ago (2h); --margin and "
                     "--lookback durations (10m, 7d)\n");
        return forensics::kExitUsage;
    }
    o.start_ns = *s;
    o.end_ns = *e;
    o.margin_ns = *m * 1'000'000;
    o.lookback_ns = *lb * 1'000'000;
    // No Loki configured anywhere: this node's files are the embedded default.
    if (!local && c.shipper.loki_url.empty() && f.loki_url.empty()) {
        std::fprintf(stderr,
                     "jobtrail: no Loki configured (shipper.loki.url or --loki-url): bundling this node's "
                     "files, as with --local\n");
        local = true;
    }
    o.local = local;
    o.log_dir = c.collector.log_dir;
    o.schema = config::stream_schema(c.shipper);
    o.nccl_dir = nccl_dir.empty() ? c.collector.layout().nccl_dir : nccl_dir;
    o.out_dir = out_dir.empty() ? c.cli.output_dir : out_dir;
    o.cluster = scope(c, f).cluster;
    o.endpoint = endpoint(c, f);
    o.query = f.query;
    o.parallel = parallel > 0 ? parallel : c.cli.parallel;
    o.max_query_parallelism = f.max_query_parallelism;
    o.split_interval_ns = f.split_interval_ns;
    o.command_line = cmdline;
    o.progress = ::isatty(2);
    const auto r = forensics::make_bundle(o);
    if (f.json) {
        std::printf("%s\n",
                    nlohmann::json{
                        {"exit_code", r.exit_code}, {"archive", r.archive}, {"error", r.error}, {"summary", r.summary}}
                        .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                        .c_str());
    } else {
        if (!r.summary.empty()) std::printf("%s\n", r.summary.c_str());
        if (!r.archive.empty()) std::printf("bundle: %s\n", r.archive.c_str());
    }
    if (!r.error.empty()) std::fprintf(stderr, "jobtrail: %s\n", r.error.c_str());
    return r.exit_code;
}

int cmd_xid_catalogue(const Common& f) {
    if (f.json)
        std::printf(
            "%s\n",
            forensics::xid_catalogue_json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    else
        std::fputs(forensics::xid_catalogue_text().c_str(), stdout);
    return forensics::kExitOk;
}

int cmd_xid(const Common& f, const std::string& since, const std::string& nodes, bool all_clusters) {
    config::Config c;
    if (!load(f, c)) return forensics::kExitUsage;
    const auto d = parse_duration_ms(since);
    if (!d) {
        std::fprintf(stderr, "jobtrail: --since takes a duration such as 24h\n");
        return forensics::kExitUsage;
    }
    loki::Client client(endpoint(c, f));
    if (auto st = client.load_secrets(); !st.ok)
        std::fprintf(stderr, "jobtrail: %s (querying without those credentials)\n", st.error.c_str());
    forensics::Scope sc = scope(c, f);
    if (all_clusters) {
        if (!f.cluster.empty()) {
            std::fprintf(stderr, "jobtrail: --cluster and --all-clusters: give one\n");
            return forensics::kExitUsage;
        }
        sc.cluster.clear();
    }
    const int64_t now = realtime_ns();
    forensics::XidTable table;
    const auto r =
        forensics::find_xids(client, sc, split_nodes(nodes), now - *d * 1'000'000, now, f.query, all_clusters, table);
    if (r.failed) {
        std::fprintf(stderr, "jobtrail: query failed: %s\n", r.error.c_str());
        return forensics::kExitPartial;
    }
    if (r.foreign) {
        std::fprintf(stderr, "jobtrail: Loki answered %llu line(s) of other clusters than %s: left out\n",
                     static_cast<unsigned long long>(r.foreign), escape_line(sc.cluster).c_str());
        return forensics::kExitPartial;
    }
    if (!all_clusters && r.clusters.size() > 1) {
        std::string names;
        for (const auto& n : r.clusters) names += (names.empty() ? "" : ", ") + escape_line(n);
        std::fprintf(stderr,
                     "jobtrail: no cluster configured, and Xid lines come from %zu clusters: %s; say which with "
                     "--cluster NAME, or --all-clusters for all of them (nodes named cluster/node)\n",
                     r.clusters.size(), names.c_str());
        return forensics::kExitUsage;
    }
    if (f.json)
        std::printf("%s\n", table.json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    else
        std::fputs(table.text(since).c_str(), stdout);
    return table.empty() ? forensics::kExitNotFound : forensics::kExitOk;
}

int cmd_node(const Common& f, const std::string& node_name, const std::string& since, bool local) {
    config::Config c;
    if (!load(f, c)) return forensics::kExitUsage;
    const auto d = parse_duration_ms(since);
    if (!d || *d <= 0) {
        std::fprintf(stderr, "jobtrail: --since takes a duration such as 24h\n");
        return forensics::kExitUsage;
    }
    const int64_t to = realtime_ns(), from = to - *d * 1'000'000;
    forensics::NodeView v(node_name, c.collector.slurm_cgroup_roots);
    std::string source;
    int rc = forensics::kExitOk;
    if (local) {
        source = "this node's job logs under " + c.collector.log_dir;
        if (forensics::node_from_local(c.collector.layout(), v, from, to) == 0) {
            std::fprintf(stderr, "jobtrail: no job logs under %s\n", c.collector.log_dir.c_str());
            rc = forensics::kExitNotFound;
        }
    } else {
        const auto ep = endpoint(c, f);
        loki::Client client(ep);
        if (auto st = client.load_secrets(); !st.ok)
            std::fprintf(stderr, "jobtrail: %s (querying without those credentials)\n", st.error.c_str());
        source = "Loki " + redact_url_credentials(ep.url);
        for (const auto& error : forensics::node_from_loki(client, scope(c, f), node_name, from, to, f.query, v)) {
            std::fprintf(stderr, "jobtrail: query failed: %s (what follows is partial)\n", error.c_str());
            rc = forensics::kExitPartial;
        }
        if (rc == forensics::kExitOk && v.jobs().empty() && v.events().empty()) rc = forensics::kExitNotFound;
    }
    if (f.json)
        std::printf("%s\n",
                    v.json(from, to, source).dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    else
        std::fputs(v.text(from, to, source).c_str(), stdout);
    return rc;
}

int cmd_logql(const Common& f, const std::string& job, const std::string& nodes) {
    config::Config c;
    if (!load(f, c)) return forensics::kExitUsage;
    const auto sc = scope(c, f);
    if (sc.cluster.empty())
        std::fprintf(stderr,
                     "jobtrail: no cluster configured (`cluster` in the config, or --cluster): these queries match "
                     "every cluster's job %s\n",
                     escape_line(job).c_str());
    const auto qs = forensics::job_queries(sc, job, split_nodes(nodes), c.shipper.structured_metadata);
    if (f.json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& q : qs) out.push_back({{"name", q.name}, {"logql", q.logql}});
        std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
        for (const auto& q : qs) std::printf("# %s\n%s\n\n", q.name.c_str(), q.logql.c_str());
    }
    return forensics::kExitOk;
}

}  // namespace

int main(int argc, char** argv) try {
    CLI::App app{
        "jobtrail: a Slurm job's kernel, prolog/epilog and NCCL records from Loki.\n"
        "Exit codes: 0 found, 1 not found, 2 usage error, 3 partial result (some queries failed), 4 error."};
    app.set_version_flag("--version", std::string(kVersion));
    app.require_subcommand(1);
    Common f;
    app.add_option("--config", f.config,
                   "configuration file (default $JOBTRAIL_CONFIG or /etc/jobtrail/jobtrail.yaml)");
    app.add_option("--loki-url", f.loki_url, "Loki base URL (default shipper.loki.url from the config)");
    app.add_option("--tenant", f.tenant, "X-Scope-OrgID (default shipper.loki.tenant)");
    app.add_option("--cluster", f.cluster,
                   "the cluster every query is for, the `cluster` label (default: `cluster` from the config; "
                   "without one, bundle and node take the one cluster holding the job or node and refuse several)");
    app.add_flag("--json", f.json, "machine-readable output");
    app.add_option("--max-query-length", f.max_query_length,
                   "Loki's max_query_length: longer queries go in pieces (a smaller limit in Loki's refusal is "
                   "learned)")
        ->capture_default_str();
    app.add_option("--max-query-lookback", f.max_query_lookback,
                   "Loki's max_query_lookback: nothing older is asked for (default: none)");
    app.add_option("--max-query-parallelism", f.max_query_parallelism,
                   "Loki's max_query_parallelism: a long bundle window keeps fewer queries in flight")
        ->capture_default_str()
        ->check(CLI::Range(1, 10000));
    app.add_option("--split-queries-by-interval", f.split_interval,
                   "Loki's split_queries_by_interval: with max_query_parallelism, how many queries are worth "
                   "running at once")
        ->capture_default_str();
    // Global options also after the subcommand (`jobtrail bundle 42 --json`), as README shows.
    app.fallthrough();

    std::string job, nodes, start, end, margin, lookback, out_dir, nccl_dir;
    bool local = false;
    int parallel = 0;
    auto* bundle = app.add_subcommand("bundle", "gather everything about a job into <cluster>-job<id>-<time>.tar.zst");
    bundle->add_option("jobid", job, "Slurm job id")->required();
    bundle->add_option("--nodes", nodes, "comma-separated nodes (default: from the job's prolog/epilog records)");
    bundle->add_option("--start", start,
                       "window start, RFC 3339 or a duration ago: bounds the search for the job and its window "
                       "(default: from the records)");
    bundle->add_option("--end", end, "window end: bounds them likewise (default: from the records)");
    bundle->add_option("--margin", margin, "kernel context before and after the job (default cli.margin, 10m)");
    bundle->add_option("--lookback", lookback, "how far back to look for the job (default cli.lookback, 7d)");
    bundle->add_flag("--local", local, "from this node's files, without Loki");
    bundle->add_option("--nccl-dir", nccl_dir, "with --local: the plugin's nccl_dir (default <log_dir>/nccl)");
    bundle->add_option("-o,--output-dir", out_dir, "where the bundle goes (default cli.output_dir, .)");
    bundle->add_option("--parallel", parallel, "queries in flight (default cli.parallel, 4)")->check(CLI::Range(1, 32));

    std::string since = "24h", xnodes;
    auto* xid = app.add_subcommand("xid", "Xid events across the fleet, node by node, with meaning and action");
    xid->add_option("--since", since, "how far back")->capture_default_str();
    xid->add_option("--nodes", xnodes, "comma-separated nodes (default: all)");
    bool catalogue = false, all_clusters = false;
    xid->add_flag("--all-clusters", all_clusters,
                  "every cluster's Xid lines, nodes named cluster/node (bundle, node and logql are one cluster's)");
    xid->add_flag("--catalogue", catalogue, "print the Xid catalogue (meaning, severity, action) instead; no Loki");

    std::string qjob, qnodes;
    auto* logql = app.add_subcommand("logql", "print a job's LogQL queries, ready for Grafana");
    logql->add_option("jobid", qjob, "Slurm job id")->required();
    logql->add_option("--nodes", qnodes, "comma-separated nodes, for the kernel and slurmd queries");

    std::string nnode, nsince = "24h";
    bool nlocal = false;
    auto* nodecmd = app.add_subcommand(
        "node", "a node's story: the jobs that ran there with their GPUs, each kernel event and the job it hit");
    nodecmd->add_option("node", nnode, "node name (the `node` label)")->required();
    nodecmd->add_option("--since", nsince, "how far back")->capture_default_str();
    nodecmd->add_flag("--local", nlocal, "from this node's job logs, without Loki");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);
        return rc == 0 ? 0 : forensics::kExitUsage;
    }
    if (!query_limits(f)) return forensics::kExitUsage;
    // For the manifest: never with credentials (a URL may carry user:password@).
    std::string cmdline;
    for (int i = 0; i < argc; ++i) cmdline += (i ? " " : "") + redact_url_credentials(argv[i]);
    try {
        if (*bundle)
            return cmd_bundle(f, job, nodes, start, end, margin, lookback, local, nccl_dir, out_dir, parallel, cmdline);
        if (*xid) return catalogue ? cmd_xid_catalogue(f) : cmd_xid(f, since, xnodes, all_clusters);
        if (*logql) return cmd_logql(f, qjob, qnodes);
        if (*nodecmd) return cmd_node(f, nnode, nsince, nlocal);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "jobtrail: error: %s\n", e.what());
        return forensics::kExitError;
    }
    return forensics::kExitUsage;
} catch (const std::exception& e) {
    // Nothing escapes as an abort: an operator at 3 a.m. gets a message and an exit code.
    std::fprintf(stderr, "jobtrail: error: %s\n", e.what());
    return forensics::kExitError;
}
