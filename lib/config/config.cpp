#include "config/config.hpp"

#include <arpa/inet.h>
#include <re2/re2.h>

#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include "common/time.hpp"
#include "config/yaml_parser.hpp"

namespace jobtrail::config {

CollectorConfig default_collector_config() {
    CollectorConfig c;
    c.prolog.scripts = {"/etc/slurm/prolog.d/*"};
    c.epilog.scripts = {"/etc/slurm/epilog.d/*"};
    const std::vector<std::string> smi = {
        "nvidia-smi",
        "--query-gpu=index,pci.bus_id,serial,uuid,temperature.gpu,ecc.errors.uncorrected.volatile.total,"
        "ecc.errors.corrected.volatile.total,retired_pages.pending,remapped_rows.pending,remapped_rows.failure",
        "--format=csv"};
    c.prolog.probes = {{"nvidia-smi", smi, 10'000}, {"dcgmi-stats", {"dcgmi", "stats", "--jstart", "{job_id}"}, 5'000}};
    c.epilog.probes = {{"nvidia-smi", smi, 10'000},
                       {"dcgmi-stats-stop", {"dcgmi", "stats", "--jstop", "{job_id}"}, 5'000},
                       {"dcgmi-stats-job", {"dcgmi", "stats", "--job", "{job_id}", "-v"}, 5'000}};
    return c;
}

std::string ConfigError::text() const {
    std::ostringstream s;
    s << file;
    if (line > 0) s << ':' << line << ':' << column;
    s << ": ";
    if (!key.empty()) s << "key '" << key << "': ";
    s << message;
    return s.str();
}

namespace {

// Ranges of the numeric keys (etc/jobtrail.yaml states them). Durations become nanosecond
// deadlines and sizes are cut into, so each key has a floor below which the code misbehaves
// (a 10-byte line cap underflows) and a ceiling past which it is a typo (a 106752d timeout).
constexpr int64_t kTimeoutMin = 100 * kMs, kTimeoutMax = 30 * kDay;  // scripts, probes
// A line cap under 1KiB leaves no room for the truncation marker; over 16MiB is no cap.
constexpr uint64_t kLineMin = kKiB, kLineMax = 16 * kMiB;
// The spool writes 16MiB segments: less than one cannot hold a segment.
constexpr uint64_t kSpoolMin = 16 * kMiB, kSpoolMax = 1024 * kGiB;

// "" when `v` is an IPv4 host:port the metrics server can bind, else why not. Port 0 would
// listen on a port the kernel picks, where no Prometheus looks.
std::string listen_error(const std::string& v) {
    const size_t colon = v.rfind(':');
    if (colon == std::string::npos) return "expected host:port such as 127.0.0.1:9480, or \"\" for no endpoint";
    in_addr a{};
    if (::inet_pton(AF_INET, v.substr(0, colon).c_str(), &a) != 1)
        return "'" + v.substr(0, colon) + "' is not an IPv4 address (such as 127.0.0.1 or 0.0.0.0)";
    const std::string port = v.substr(colon + 1);
    int n = 0;
    for (char c : port) {
        if (c < '0' || c > '9' || n > 65535) return "port '" + port + "' is not a number from 1 to 65535";
        n = n * 10 + (c - '0');
    }
    if (port.empty() || n < 1 || n > 65535) return "port '" + port + "' is not a number from 1 to 65535";
    return "";
}

void parse_probes(Parser& p, const YAML::Node& n, const std::string& key, std::vector<Probe>& out) {
    if (!n.IsSequence()) {
        p.error(n, key, "expected a list of probes ({name, command, timeout})");
        return;
    }
    std::vector<Probe> v;
    size_t i = 0;
    for (const auto& item : n) {
        const std::string where = key + "[" + std::to_string(i++) + "]";
        if (!p.check_map(item, where, {"name", "command", "timeout"})) return;
        Probe probe;
        p.string(item, where, "name", probe.name);
        if (!item["command"]) {
            p.error(item, where + ".command", "missing: the program and its arguments");
            return;
        }
        if (!p.string_list(item["command"], where + ".command", probe.argv)) return;  // said there
        if (probe.argv.empty()) {
            // Said, not passed over: the whole list would otherwise keep its defaults silently.
            p.error(item["command"], where + ".command", "empty: the program and its arguments");
            return;
        }
        if (probe.name.empty()) probe.name = probe.argv[0];
        p.duration(item, where, "timeout", probe.timeout_ms, kTimeoutMin, kTimeoutMax);
        v.push_back(std::move(probe));
    }
    out = std::move(v);
}

void parse_phase(Parser& p, const YAML::Node& n, const std::string& where, PhaseConfig& out, bool epilog) {
    if (epilog) {
        if (!p.check_map(n, where, {"scripts", "script_timeout", "total_timeout", "probes", "fail_on_xid"})) return;
    } else if (!p.check_map(n, where, {"scripts", "script_timeout", "total_timeout", "probes"})) {
        return;
    }
    if (n["scripts"]) p.string_list(n["scripts"], Parser::join(where, "scripts"), out.scripts);
    p.duration(n, where, "script_timeout", out.script_timeout_ms, kTimeoutMin, kTimeoutMax);
    p.duration(n, where, "total_timeout", out.total_timeout_ms, kTimeoutMin, kTimeoutMax);
    if (n["probes"]) parse_probes(p, n["probes"], Parser::join(where, "probes"), out.probes);
    if (epilog && n["fail_on_xid"]) {
        const YAML::Node x = n["fail_on_xid"];
        std::vector<int> codes;
        bool ok = x.IsSequence();
        if (ok) {
            for (const auto& item : x) {
                try {
                    codes.push_back(item.as<int>());
                } catch (const YAML::Exception&) {
                    ok = false;
                }
            }
        }
        if (!ok)
            p.error(x, Parser::join(where, "fail_on_xid"), "expected a list of Xid numbers such as [79, 48, 74, 95]");
        else
            out.fail_on_xid = std::move(codes);
    }
}

void parse_collector(Parser& p, const YAML::Node& n, CollectorConfig& c) {
    const std::string w = "collector";
    if (!p.check_map(n, w,
                     {"log_dir", "state_dir", "run_dir", "nccl_dir", "kmsg", "nvidia_proc", "gres_command", "path",
                      "kernel_context", "max_log_bytes", "max_line_bytes", "kill_grace", "kmsg_budget",
                      "slurm_cgroup_roots", "prolog", "epilog"}))
        return;
    p.path(n, w, "log_dir", c.log_dir);
    p.path(n, w, "state_dir", c.state_dir);
    p.path(n, w, "run_dir", c.run_dir);
    p.path(n, w, "kmsg", c.kmsg_path);
    p.path(n, w, "nvidia_proc", c.nvidia_proc);
    if (n["gres_command"] && p.string_list(n["gres_command"], Parser::join(w, "gres_command"), c.gres_command) &&
        c.gres_command.empty())
        p.error(n["gres_command"], Parser::join(w, "gres_command"), "empty: the program and its arguments");
    p.path(n, w, "nccl_dir", c.nccl_dir);
    if (const YAML::Node r = n["slurm_cgroup_roots"]) {
        const std::string key = Parser::join(w, "slurm_cgroup_roots");
        std::vector<std::string> roots;
        if (p.string_list(r, key, roots)) {
            bool ok = true;
            for (size_t i = 0; i < roots.size(); ++i)
                if (roots[i][0] != '/' || roots[i].find(',') != std::string::npos) {
                    p.error(r[i], key,
                            "'" + roots[i] + "' is not a cgroup path such as /system.slice/slurmstepd.scope");
                    ok = false;
                }
            if (ok) c.slurm_cgroup_roots = std::move(roots);
        }
    }
    p.string(n, w, "path", c.path);
    if (const YAML::Node k = n["kernel_context"]) {
        if (p.check_map(k, w + ".kernel_context", {"records", "max_age"})) {
            p.integer(k, w + ".kernel_context", "records", c.context_records, 0, 100'000);
            p.duration(k, w + ".kernel_context", "max_age", c.context_ms, kSec, 30 * kDay);
        }
    }
    p.size(n, w, "max_log_bytes", c.max_log_bytes, 64 * kKiB, 4 * kGiB);
    p.size(n, w, "max_line_bytes", c.max_line_bytes, kLineMin, kLineMax);
    p.duration(n, w, "kill_grace", c.kill_grace_ms, 10 * kMs, 5 * kMin);
    p.duration(n, w, "kmsg_budget", c.kmsg_budget_ms, 10 * kMs, kMin);
    if (n["prolog"]) parse_phase(p, n["prolog"], w + ".prolog", c.prolog, false);
    if (n["epilog"]) parse_phase(p, n["epilog"], w + ".epilog", c.epilog, true);
}

void parse_shipper(Parser& p, const YAML::Node& n, SourceSections sections, ShipperConfig& c) {
    const std::string w = "shipper";
    if (!p.check_map(n, w,
                     {"loki", "spool", "batch", "retry", "max_age", "max_line_bytes", "metrics", "heartbeat", "sources",
                      "stages"}))
        return;
    if (const YAML::Node l = n["loki"]) {
        const std::string lw = w + ".loki";
        if (p.check_map(l, lw,
                        {"url", "tenant", "username", "password_file", "bearer_token_file", "ca_file", "cert_file",
                         "key_file", "tls_verify", "timeout", "structured_metadata"})) {
            p.string(l, lw, "url", c.loki_url);
            p.string(l, lw, "tenant", c.tenant);
            p.string(l, lw, "username", c.basic_user);
            p.path(l, lw, "password_file", c.basic_password_file);
            p.path(l, lw, "bearer_token_file", c.bearer_token_file);
            p.path(l, lw, "ca_file", c.ca_file);
            p.path(l, lw, "cert_file", c.cert_file);
            p.path(l, lw, "key_file", c.key_file);
            p.boolean(l, lw, "tls_verify", c.tls_verify);
            p.duration(l, lw, "timeout", c.timeout_ms, kTimeoutMin, 10 * kMin);
            p.boolean(l, lw, "structured_metadata", c.structured_metadata);
            if (!c.loki_url.empty() && c.loki_url.rfind("http://", 0) != 0 && c.loki_url.rfind("https://", 0) != 0)
                p.error(l["url"], lw + ".url", "expected an http:// or https:// URL");
        }
    }
    if (const YAML::Node s = n["spool"]; s && p.check_map(s, w + ".spool", {"dir", "max_size", "fsync"})) {
        p.boolean(s, w + ".spool", "fsync", c.spool_fsync);
        p.path(s, w + ".spool", "dir", c.spool_dir);
        p.size(s, w + ".spool", "max_size", c.spool_max_bytes, kSpoolMin, kSpoolMax);
    }
    if (const YAML::Node b = n["batch"];
        b && p.check_map(b, w + ".batch", {"max_bytes", "max_wait", "max_in_flight", "max_stream_rate"})) {
        p.size(b, w + ".batch", "max_bytes", c.batch_max_bytes, 16 * kKiB, 16 * kMiB);
        p.duration(b, w + ".batch", "max_wait", c.batch_wait_ms, 10 * kMs, kMin);
        int in_flight = static_cast<int>(c.max_in_flight);
        p.integer(b, w + ".batch", "max_in_flight", in_flight, 1, 16);
        c.max_in_flight = static_cast<size_t>(in_flight);
        p.size(b, w + ".batch", "max_stream_rate", c.max_stream_rate, 64 * kKiB, kGiB, /*zero_is_off=*/true);
    }
    if (const YAML::Node r = n["retry"]; r && p.check_map(r, w + ".retry", {"min_backoff", "max_backoff"})) {
        p.duration(r, w + ".retry", "min_backoff", c.min_backoff_ms, 10 * kMs, 10 * kMin);
        p.duration(r, w + ".retry", "max_backoff", c.max_backoff_ms, 10 * kMs, kDay);
        if (c.min_backoff_ms > c.max_backoff_ms)
            p.error(r["max_backoff"] ? r["max_backoff"] : r["min_backoff"], w + ".retry.max_backoff",
                    "max_backoff (" + Parser::format_ms(c.max_backoff_ms) + ") is below min_backoff (" +
                        Parser::format_ms(c.min_backoff_ms) + ")");
    }
    p.duration(n, w, "max_age", c.max_age_ms, kMin, 365 * kDay);
    // A spool record holds at most 8 MiB (its frame's limit), metadata included.
    p.size(n, w, "max_line_bytes", c.max_line_bytes, kLineMin, 4 * kMiB);
    if (const YAML::Node m = n["metrics"]) {
        const std::string why = !m.IsScalar() ? "expected host:port such as 127.0.0.1:9480, or \"\" for no endpoint"
                                : m.Scalar().empty() ? ""
                                                     : listen_error(m.Scalar());
        if (!why.empty())
            p.error(m, w + ".metrics", why);
        else
            c.metrics_listen = m.Scalar();  // "": no /metrics endpoint
    }
    p.duration(n, w, "heartbeat", c.heartbeat_ms, kSec, kDay, /*zero_is_off=*/true);
    // The sources' sections, each parsed by its kind (config/sources.hpp), in the kinds' order.
    std::vector<const char*> kinds;
    for (const auto& k : sections) kinds.push_back(k.name);
    if (const YAML::Node src = n["sources"]; src && p.check_map(src, w + ".sources", kinds))
        for (const auto& k : sections) k.parse(p, src, w + ".sources", c.sources[k.name]);
    c.schema = node::Schema{};
    for (const auto& k : sections) k.schema(c.sources[k.name], c.schema);
    if (const YAML::Node st = n["stages"];
        st && p.check_map(st, w + ".stages", {"drop", "drop_blank", "nccl_noise", "nccl_budget"})) {
        p.boolean(st, w + ".stages", "drop_blank", c.drop_blank);
        p.boolean(st, w + ".stages", "nccl_noise", c.nccl_noise);
        const std::string bw = w + ".stages.nccl_budget";
        if (const YAML::Node b = st["nccl_budget"]; b && p.check_map(b, bw, {"bytes", "window"})) {
            p.size(b, bw, "bytes", c.nccl_budget_bytes, 64 * kKiB, 64 * kGiB, /*zero_is_off=*/true);
            p.duration(b, bw, "window", c.nccl_budget_window_ms, kSec, 60 * kMin);
        }
        if (const YAML::Node d = st["drop"]) {
            if (!d.IsSequence()) {
                p.error(d, w + ".stages.drop", "expected a list of {name, pattern}");
            } else {
                size_t i = 0;
                for (const auto& item : d) {
                    const std::string dw = w + ".stages.drop[" + std::to_string(i++) + "]";
                    if (!p.check_map(item, dw, {"name", "pattern"})) continue;
                    DropRule r;
                    p.string(item, dw, "name", r.name);
                    p.string(item, dw, "pattern", r.pattern);
                    if (r.pattern.empty()) {
                        p.error(item, dw + ".pattern", "missing: an RE2 pattern");
                        continue;
                    }
                    // Compiled as the stages compile it: a bad pattern would otherwise drop nothing, silently.
                    RE2::Options o;
                    o.set_log_errors(false);
                    if (const RE2 re(r.pattern, o); !re.ok())
                        p.error(item["pattern"], dw + ".pattern", "not a valid RE2 pattern: " + re.error());
                    else
                        c.drop.push_back(r);
                }
            }
        }
    }
}

}  // namespace

loki::Endpoint loki_endpoint(const ShipperConfig& c) {
    loki::Endpoint e;
    e.url = c.loki_url;
    e.tenant = c.tenant;
    e.basic_user = c.basic_user;
    e.basic_password_file = c.basic_password_file;
    e.bearer_token_file = c.bearer_token_file;
    e.ca_file = c.ca_file;
    e.cert_file = c.cert_file;
    e.key_file = c.key_file;
    e.tls_verify = c.tls_verify;
    e.timeout_ms = c.timeout_ms;
    return e;
}

node::Schema stream_schema(const ShipperConfig& c) {
    return c.schema;
}

node::Layout CollectorConfig::layout() const {
    node::Layout l;
    l.log_dir = log_dir;
    l.nccl_dir = nccl_dir.empty() ? log_dir + "/nccl" : nccl_dir;
    l.run_dir = run_dir;
    l.state_dir = state_dir;
    return l;
}

ShipperConfig default_shipper_config() {
    return {};
}

LoadResult parse_config(const std::string& text, const std::string& file, SourceSections sections) {
    LoadResult r;
    for (const auto& k : sections) r.config.shipper.sources[k.name] = k.defaults();
    Parser p(file, r.errors);
    YAML::Node root;
    try {
        root = YAML::Load(text);
    } catch (const YAML::ParserException& e) {
        r.errors.push_back({file, e.mark.line + 1, e.mark.column + 1, "", "YAML syntax error: " + e.msg});
        return r;
    }
    if (!root || root.IsNull()) return r;  // an empty file means all defaults
    if (!p.check_map(root, "", {"cluster", "node", "collector", "shipper", "cli"})) return r;
    try {
        p.string(root, "", "cluster", r.config.cluster);
        p.string(root, "", "node", r.config.node);
        if (root["collector"]) parse_collector(p, root["collector"], r.config.collector);
        if (root["shipper"]) parse_shipper(p, root["shipper"], sections, r.config.shipper);
        if (const YAML::Node c = root["cli"];
            c && p.check_map(c, "cli", {"output_dir", "margin", "lookback", "parallel"})) {
            p.string(c, "cli", "output_dir", r.config.cli.output_dir);
            p.duration(c, "cli", "margin", r.config.cli.margin_ms, kSec, kDay);
            p.duration(c, "cli", "lookback", r.config.cli.lookback_ms, kMin, 365 * kDay);
            p.integer(c, "cli", "parallel", r.config.cli.parallel, 1, 32);
        }
    } catch (const YAML::Exception& e) {
        r.errors.push_back({file, e.mark.line + 1, e.mark.column + 1, "", e.msg});
    }
    return r;
}

LoadResult load_config(const std::string& path, SourceSections sections) {
    std::ifstream in(path);
    if (!in) {
        LoadResult r;
        r.file_missing = true;
        return r;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_config(ss.str(), path, sections);
}

std::string resolve_config_path(const std::string& flag_value) {
    if (!flag_value.empty()) return flag_value;
    if (const char* env = std::getenv("JOBTRAIL_CONFIG"); env && *env) return env;
    return kDefaultConfigPath;
}

}  // namespace jobtrail::config
