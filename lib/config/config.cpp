#include "config/config.hpp"

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
        if (!item["command"] || !p.string_list(item["command"], where + ".command", probe.argv) || probe.argv.empty()) {
            if (!item["command"]) p.error(item, where + ".command", "missing: the program and its arguments");
            return;
        }
        if (probe.name.empty()) probe.name = probe.argv[0];
        p.duration(item, where, "timeout", probe.timeout_ms);
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
    p.duration(n, where, "script_timeout", out.script_timeout_ms);
    p.duration(n, where, "total_timeout", out.total_timeout_ms);
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
                     {"log_dir", "state_dir", "run_dir", "nccl_dir", "kmsg", "path", "kernel_context", "max_log_bytes",
                      "max_line_bytes", "kill_grace", "kmsg_budget", "prolog", "epilog"}))
        return;
    p.path(n, w, "log_dir", c.log_dir);
    p.path(n, w, "state_dir", c.state_dir);
    p.path(n, w, "run_dir", c.run_dir);
    p.path(n, w, "kmsg", c.kmsg_path);
    p.path(n, w, "nccl_dir", c.nccl_dir);
    p.string(n, w, "path", c.path);
    if (const YAML::Node k = n["kernel_context"]) {
        if (p.check_map(k, w + ".kernel_context", {"records", "max_age"})) {
            p.integer(k, w + ".kernel_context", "records", c.context_records, 0, 100'000);
            p.duration(k, w + ".kernel_context", "max_age", c.context_ms);
        }
    }
    p.size(n, w, "max_log_bytes", c.max_log_bytes);
    p.size(n, w, "max_line_bytes", c.max_line_bytes);
    p.duration(n, w, "kill_grace", c.kill_grace_ms);
    p.duration(n, w, "kmsg_budget", c.kmsg_budget_ms);
    if (n["prolog"]) parse_phase(p, n["prolog"], w + ".prolog", c.prolog, false);
    if (n["epilog"]) parse_phase(p, n["epilog"], w + ".epilog", c.epilog, true);
}

void parse_shipper(Parser& p, const YAML::Node& n, ShipperConfig& c) {
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
            p.duration(l, lw, "timeout", c.timeout_ms);
            p.boolean(l, lw, "structured_metadata", c.structured_metadata);
            if (!c.loki_url.empty() && c.loki_url.rfind("http://", 0) != 0 && c.loki_url.rfind("https://", 0) != 0)
                p.error(l["url"], lw + ".url", "expected an http:// or https:// URL");
        }
    }
    if (const YAML::Node s = n["spool"]; s && p.check_map(s, w + ".spool", {"dir", "max_size", "fsync"})) {
        p.boolean(s, w + ".spool", "fsync", c.spool_fsync);
        p.path(s, w + ".spool", "dir", c.spool_dir);
        p.size(s, w + ".spool", "max_size", c.spool_max_bytes);
    }
    if (const YAML::Node b = n["batch"]; b && p.check_map(b, w + ".batch", {"max_bytes", "max_wait"})) {
        p.size(b, w + ".batch", "max_bytes", c.batch_max_bytes);
        p.duration(b, w + ".batch", "max_wait", c.batch_wait_ms);
    }
    if (const YAML::Node r = n["retry"]; r && p.check_map(r, w + ".retry", {"min_backoff", "max_backoff"})) {
        p.duration(r, w + ".retry", "min_backoff", c.min_backoff_ms);
        p.duration(r, w + ".retry", "max_backoff", c.max_backoff_ms);
    }
    p.duration(n, w, "max_age", c.max_age_ms);
    p.size(n, w, "max_line_bytes", c.max_line_bytes);
    p.string(n, w, "metrics", c.metrics_listen);
    p.duration(n, w, "heartbeat", c.heartbeat_ms);
    if (const YAML::Node src = n["sources"]; src && p.check_map(src, w + ".sources", {"kmsg", "files", "journald"})) {
        p.boolean(src, w + ".sources", "kmsg", c.kmsg);
        const std::string jw = w + ".sources.journald";
        if (const YAML::Node j = src["journald"]; j && p.check_map(j, jw, {"enabled", "units", "directory", "since"})) {
            p.boolean(j, jw, "enabled", c.journald.enabled);
            if (j["units"]) p.string_list(j["units"], jw + ".units", c.journald.units);
            p.path(j, jw, "directory", c.journald.directory);
            p.duration(j, jw, "since", c.journald.since_ms);
        }
        if (const YAML::Node f = src["files"]) {
            if (!f.IsSequence()) {
                p.error(f, w + ".sources.files", "expected a list of file sources");
            } else {
                std::vector<FileSourceConfig> files;
                size_t i = 0;
                for (const auto& item : f) {
                    const std::string fw = w + ".sources.files[" + std::to_string(i++) + "]";
                    if (!p.check_map(
                            item, fw,
                            {"name", "paths", "job", "format", "stream", "labels", "max_files", "max_files_per_dir"}))
                        continue;
                    FileSourceConfig fs;
                    p.string(item, fw, "name", fs.name);
                    p.string(item, fw, "job", fs.job);
                    p.string(item, fw, "format", fs.format);
                    if (item["paths"]) p.string_list(item["paths"], fw + ".paths", fs.paths);
                    int max_files = static_cast<int>(fs.max_files), per_dir = static_cast<int>(fs.max_files_per_dir);
                    p.integer(item, fw, "max_files", max_files, 1, 1'000'000);
                    p.integer(item, fw, "max_files_per_dir", per_dir, 1, 1'000'000);
                    fs.max_files = static_cast<size_t>(max_files);
                    fs.max_files_per_dir = static_cast<size_t>(per_dir);
                    if (fs.paths.empty()) p.error(item, fw + ".paths", "missing: at least one path or glob");
                    if (fs.job.empty()) p.error(item, fw + ".job", "missing: the Loki job label for these files");
                    if (fs.format != "plain" && fs.format != "joblog" && fs.format != "nccl" && fs.format != "cri")
                        p.error(item["format"], fw + ".format", "expected plain, joblog, nccl or cri");
                    fs.stream = fs.format == "joblog" ? node::Stream::kJobLog
                                : fs.format == "nccl" ? node::Stream::kNccl
                                                      : node::Stream::kOther;
                    if (item["stream"]) {
                        std::string kind;
                        p.string(item, fw, "stream", kind);
                        const auto k = node::parse_stream_kind(kind);
                        if (!k || *k == node::Stream::kKernel || *k == node::Stream::kJournal ||
                            *k == node::Stream::kShipper)
                            p.error(item["stream"], fw + ".stream", "expected job-log, nccl, fabric-manager or other");
                        else
                            fs.stream = *k;
                    }
                    if (const YAML::Node lb = item["labels"]) {
                        if (!lb.IsMap()) {
                            p.error(lb, fw + ".labels", "expected a mapping of label names to values");
                        } else {
                            for (const auto& kv : lb)
                                fs.labels.emplace_back(kv.first.as<std::string>(""), kv.second.as<std::string>(""));
                        }
                    }
                    if (fs.name.empty()) fs.name = fs.job;
                    files.push_back(std::move(fs));
                }
                c.files = std::move(files);
            }
        }
    }
    if (const YAML::Node st = n["stages"]; st && p.check_map(st, w + ".stages", {"drop", "drop_blank", "nccl_noise"})) {
        p.boolean(st, w + ".stages", "drop_blank", c.drop_blank);
        p.boolean(st, w + ".stages", "nccl_noise", c.nccl_noise);
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
                    if (r.pattern.empty())
                        p.error(item, dw + ".pattern", "missing: an RE2 pattern");
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
    node::Schema s;
    for (const auto& f : c.files)
        if (f.stream != node::Stream::kOther) s.set_job(f.stream, f.job);
    return s;
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
    ShipperConfig c;
    const node::Layout layout;
    const node::Schema schema;
    using node::Stream;
    c.files = {{"prolog-epilog", {layout.job_logs_glob()}, schema.job(Stream::kJobLog), "joblog", {}, Stream::kJobLog},
               {"nccl", {layout.nccl_files_glob()}, schema.job(Stream::kNccl), "nccl", {}, Stream::kNccl},
               {"fabric-manager",
                {"/var/log/fabricmanager.log"},
                schema.job(Stream::kFabricManager),
                "plain",
                {},
                Stream::kFabricManager}};
    c.journald.enabled = true;
    c.journald.units = {"slurmd.service",
                        "slurmctld.service",
                        "munge.service",
                        "nvidia-fabricmanager.service",
                        "nvidia-persistenced.service",
                        "nvidia-dcgm.service"};
    return c;
}

LoadResult parse_config(const std::string& text, const std::string& file) {
    LoadResult r;
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
        if (root["shipper"]) parse_shipper(p, root["shipper"], r.config.shipper);
        if (const YAML::Node c = root["cli"];
            c && p.check_map(c, "cli", {"output_dir", "margin", "lookback", "parallel"})) {
            p.string(c, "cli", "output_dir", r.config.cli.output_dir);
            p.duration(c, "cli", "margin", r.config.cli.margin_ms);
            p.duration(c, "cli", "lookback", r.config.cli.lookback_ms);
            p.integer(c, "cli", "parallel", r.config.cli.parallel, 1, 32);
        }
    } catch (const YAML::Exception& e) {
        r.errors.push_back({file, e.mark.line + 1, e.mark.column + 1, "", e.msg});
    }
    return r;
}

LoadResult load_config(const std::string& path) {
    std::ifstream in(path);
    if (!in) {
        LoadResult r;
        r.file_missing = true;
        return r;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_config(ss.str(), path);
}

std::string resolve_config_path(const std::string& flag_value) {
    if (!flag_value.empty()) return flag_value;
    if (const char* env = std::getenv("JOBTRAIL_CONFIG"); env && *env) return env;
    return kDefaultConfigPath;
}

}  // namespace jobtrail::config
