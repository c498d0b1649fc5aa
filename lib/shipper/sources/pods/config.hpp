#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shipper/sources/file/config.hpp"
#include "shipper/sources/kind.hpp"

namespace jobtrail::shipper {

// kubelet's tree read as a file source: CRI, 64 files per container directory (its restarts'
// logs and their rotations), root's files (no owner share).
FileSourceConfig pod_file_defaults();

// shipper.sources.pods: Kubernetes pod logs as kubelet writes them (CRI format), for sites that
// run Slurm on Kubernetes or training jobs as pods. One stream per container:
// {job=<job>, namespace, pod, container, node}, job_id for a pod the site says runs a Slurm job.
struct PodsConfig {
    bool enabled = false;
    std::string root = "/var/log/pods";   // <root>/<namespace>_<pod>_<uid>/<container>/<n>.log
    std::string job = "kubernetes-pods";  // the Loki `job` label of the pod streams
    // Pods that carry a Slurm job's id: only those in these namespaces (exact names; who may make
    // pods there is the site's to decide), and only when job_id_pattern matches the whole pod
    // name (RE2; its one capture group is the Slurm job id). None by default: anyone who can run
    // a pod could otherwise name it after another user's job and take its identity.
    std::vector<std::string> job_id_namespaces;
    std::string job_id_pattern = "slurm-job-([0-9]+)(?:-[a-z0-9.-]*)?";
    // RE2, full match against the container name (`trainer` is not `trainer-exporter`): its lines go through the stages
    // as NCCL output (INFO noise of jobs without trace capture dropped, the per-job NCCL budget).
    std::vector<std::string> nccl_containers;
    // The file source it is (its bounds: max_files, max_open_files, idle_close, max_partial_bytes).
    FileSourceConfig files = pod_file_defaults();
};

struct PodsKind {
    static constexpr const char* kName = "pods";
    using Config = PodsConfig;
    static Config defaults() { return {}; }
    static void parse(config::Parser& p, const YAML::Node& sources, const std::string& where, Config& out);
    static void schema(const Config& c, node::Schema& s) { s.set_job(node::StreamKind::kPod, c.job); }
    static void build(const SourceContext& ctx, const Config& c, Sources& out);
    static void declare_metrics(metrics::Registry& m);
};

}  // namespace jobtrail::shipper
