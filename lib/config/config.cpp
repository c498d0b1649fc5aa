#include "config/config.hpp"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include "common/time.hpp"

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

class Parser {
public:
    Parser(std::string file, std::vector<ConfigError>& errors) : file_(std::move(file)), errors_(errors) {}

    void error(const YAML::Node& n, const std::string& key, const std::string& msg) {
        const YAML::Mark m = n.Mark();
        errors_.push_back({file_, m.line >= 0 ? m.line + 1 : 0, m.column >= 0 ? m.column + 1 : 0, key, msg});
    }

    // Reports keys of a mapping that are not in `allowed`; false if n is not a mapping.
    bool check_map(const YAML::Node& n, const std::string& where, std::initializer_list<const char*> allowed) {
        if (!n.IsMap()) {
            error(n, where, "expected a mapping of keys");
            return false;
        }
        for (const auto& kv : n) {
            const std::string k = kv.first.as<std::string>("");
            bool ok = false;
            for (const char* a : allowed) ok = ok || k == a;
            if (!ok) {
                std::string list;
                for (const char* a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
                error(kv.first, join(where, k), "unknown key (allowed here: " + list + ")");
            }
        }
        return true;
    }

    static std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

    void string(const YAML::Node& parent, const std::string& where, const char* key, std::string& out) {
        const YAML::Node n = parent[key];
        if (!n) return;
        if (!n.IsScalar() || n.Scalar().empty()) {
            error(n, join(where, key), "expected a non-empty string");
            return;
        }
        out = n.Scalar();
    }

    void path(const YAML::Node& parent, const std::string& where, const char* key, std::string& out) {
        std::string v = out;
        string(parent, where, key, v);
        if (v != out && !v.empty() && v[0] != '/') {
            error(parent[key], join(where, key), "expected an absolute path, got '" + v + "'");
            return;
        }
        out = v;
    }

    void duration(const YAML::Node& parent, const std::string& where, const char* key, int64_t& out_ms) {
        const YAML::Node n = parent[key];
        if (!n) return;
        auto v = n.IsScalar() ? parse_duration_ms(n.Scalar()) : std::nullopt;
        if (!v || *v <= 0) {
            error(n, join(where, key),
                  "expected a positive duration such as 500ms, 30s, 5m, got '" +
                      (n.IsScalar() ? n.Scalar() : std::string("(not a scalar)")) + "'");
            return;
        }
        out_ms = *v;
    }

    void size(const YAML::Node& parent, const std::string& where, const char* key, uint64_t& out) {
        const YAML::Node n = parent[key];
        if (!n) return;
        auto v = n.IsScalar() ? parse_size(n.Scalar()) : std::nullopt;
        if (!v || *v == 0) {
            error(n, join(where, key),
                  "expected a size such as 64KiB or 32MiB, got '" +
                      (n.IsScalar() ? n.Scalar() : std::string("(not a scalar)")) + "'");
            return;
        }
        out = *v;
    }

    void integer(const YAML::Node& parent, const std::string& where, const char* key, int& out, int lo, int hi) {
        const YAML::Node n = parent[key];
        if (!n) return;
        int v = 0;
        bool ok = n.IsScalar();
        try {
            if (ok) v = n.as<int>();
        } catch (const YAML::Exception&) {
            ok = false;
        }
        if (!ok || v < lo || v > hi) {
            error(n, join(where, key), "expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
            return;
        }
        out = v;
    }

    bool string_list(const YAML::Node& n, const std::string& key, std::vector<std::string>& out) {
        if (!n.IsSequence()) {
            error(n, key, "expected a list of strings");
            return false;
        }
        std::vector<std::string> v;
        for (const auto& item : n) {
            if (!item.IsScalar() || item.Scalar().empty()) {
                error(item, key, "expected a non-empty string in the list");
                return false;
            }
            v.push_back(item.Scalar());
        }
        out = std::move(v);
        return true;
    }

    void probes(const YAML::Node& n, const std::string& key, std::vector<Probe>& out) {
        if (!n.IsSequence()) {
            error(n, key, "expected a list of probes ({name, command, timeout})");
            return;
        }
        std::vector<Probe> v;
        size_t i = 0;
        for (const auto& item : n) {
            const std::string where = key + "[" + std::to_string(i++) + "]";
            if (!check_map(item, where, {"name", "command", "timeout"})) return;
            Probe p;
            string(item, where, "name", p.name);
            if (!item["command"] || !string_list(item["command"], where + ".command", p.argv) || p.argv.empty()) {
                if (!item["command"]) error(item, where + ".command", "missing: the program and its arguments");
                return;
            }
            if (p.name.empty()) p.name = p.argv[0];
            duration(item, where, "timeout", p.timeout_ms);
            v.push_back(std::move(p));
        }
        out = std::move(v);
    }

    void phase(const YAML::Node& n, const std::string& where, PhaseConfig& out, bool epilog) {
        if (epilog) {
            if (!check_map(n, where, {"scripts", "script_timeout", "total_timeout", "probes", "fail_on_xid"})) return;
        } else if (!check_map(n, where, {"scripts", "script_timeout", "total_timeout", "probes"})) {
            return;
        }
        if (n["scripts"]) string_list(n["scripts"], join(where, "scripts"), out.scripts);
        duration(n, where, "script_timeout", out.script_timeout_ms);
        duration(n, where, "total_timeout", out.total_timeout_ms);
        if (n["probes"]) probes(n["probes"], join(where, "probes"), out.probes);
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
                error(x, join(where, "fail_on_xid"), "expected a list of Xid numbers such as [79, 48, 74, 95]");
            else
                out.fail_on_xid = std::move(codes);
        }
    }

    void collector(const YAML::Node& n, CollectorConfig& c) {
        const std::string w = "collector";
        if (!check_map(n, w,
                       {"log_dir", "state_dir", "run_dir", "kmsg", "path", "kernel_context", "max_log_bytes",
                        "max_line_bytes", "kill_grace", "kmsg_budget", "prolog", "epilog"}))
            return;
        path(n, w, "log_dir", c.log_dir);
        path(n, w, "state_dir", c.state_dir);
        path(n, w, "run_dir", c.run_dir);
        path(n, w, "kmsg", c.kmsg_path);
        string(n, w, "path", c.path);
        if (const YAML::Node k = n["kernel_context"]) {
            if (check_map(k, w + ".kernel_context", {"records", "max_age"})) {
                integer(k, w + ".kernel_context", "records", c.context_records, 0, 100'000);
                duration(k, w + ".kernel_context", "max_age", c.context_ms);
            }
        }
        size(n, w, "max_log_bytes", c.max_log_bytes);
        size(n, w, "max_line_bytes", c.max_line_bytes);
        duration(n, w, "kill_grace", c.kill_grace_ms);
        duration(n, w, "kmsg_budget", c.kmsg_budget_ms);
        if (n["prolog"]) phase(n["prolog"], w + ".prolog", c.prolog, false);
        if (n["epilog"]) phase(n["epilog"], w + ".epilog", c.epilog, true);
    }

private:
    std::string file_;
    std::vector<ConfigError>& errors_;
};

}  // namespace

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
    // Sections of parts that read this file too (shipper, cli) are accepted here and checked by
    // their own parsers.
    if (!p.check_map(root, "", {"cluster", "node", "collector", "shipper", "cli"})) return r;
    try {
        p.string(root, "", "cluster", r.config.cluster);
        p.string(root, "", "node", r.config.node);
        if (root["collector"]) p.collector(root["collector"], r.config.collector);
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
