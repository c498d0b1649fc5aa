#include "shipper/sources/pods/config.hpp"

#include <re2/re2.h>

#include "config/yaml_parser.hpp"

namespace jobtrail::shipper {

namespace {

// An RE2 pattern, compiled now: a bad one is an error at --check-config, not at the first pod.
bool compiles(config::Parser& p, const YAML::Node& n, const std::string& key, const std::string& pattern, int groups) {
    RE2::Options o;
    o.set_log_errors(false);
    const RE2 re(pattern, o);
    if (!re.ok()) {
        p.error(n, key, "not a valid RE2 pattern: " + re.error());
        return false;
    }
    if (groups >= 0 && re.NumberOfCapturingGroups() != groups) {
        p.error(n, key,
                "expected exactly one capture group (the Slurm job id), found " +
                    std::to_string(re.NumberOfCapturingGroups()));
        return false;
    }
    return true;
}

}  // namespace

FileSourceConfig pod_file_defaults() {
    FileSourceConfig f;
    f.name = PodsKind::kName;
    f.format = LineFormat::kCri;
    f.stream = node::StreamKind::kPod;
    f.max_files_per_dir = 64;
    f.max_files_per_owner = f.max_files;  // kubelet's files are root's: the share does not apply
    return f;
}

void PodsKind::parse(config::Parser& p, const YAML::Node& sources, const std::string& where, Config& out) {
    const std::string w = where + "." + kName;
    const YAML::Node n = sources[kName];
    if (!n || !p.check_map(n, w,
                           {"enabled", "root", "job", "job_id_namespaces", "job_id_pattern", "nccl_containers",
                            "max_files", "max_open_files", "idle_close", "max_partial_bytes"}))
        return;
    p.boolean(n, w, "enabled", out.enabled);
    p.path(n, w, "root", out.root);
    while (out.root.size() > 1 && out.root.back() == '/') out.root.pop_back();
    p.string(n, w, "job", out.job);
    if (n["job_id_namespaces"]) p.string_list(n["job_id_namespaces"], w + ".job_id_namespaces", out.job_id_namespaces);
    p.string(n, w, "job_id_pattern", out.job_id_pattern);
    if (n["job_id_pattern"]) compiles(p, n["job_id_pattern"], w + ".job_id_pattern", out.job_id_pattern, 1);
    if (const YAML::Node c = n["nccl_containers"]) {
        std::vector<std::string> patterns;
        if (p.string_list(c, w + ".nccl_containers", patterns)) {
            for (size_t i = 0; i < patterns.size(); ++i)
                compiles(p, c[i], w + ".nccl_containers[" + std::to_string(i) + "]", patterns[i], -1);
            out.nccl_containers = std::move(patterns);
        }
    }
    parse_file_bounds(p, n, w, out.files);
}

}  // namespace jobtrail::shipper
