#include "shipper/sources/pods/pods_source.hpp"

#include <re2/re2.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "node/layout.hpp"
#include "node/schema.hpp"
#include "shipper/sources/pods/pod_path.hpp"

namespace jobtrail::shipper {

Labeler pod_labeler(const PodsConfig& c) {
    RE2::Options o;
    o.set_log_errors(false);
    auto job_id = std::make_shared<const RE2>(c.job_id_pattern, o);
    std::vector<std::shared_ptr<const RE2>> nccl;
    for (const auto& p : c.nccl_containers) nccl.push_back(std::make_shared<const RE2>(p, o));
    return
        [root = c.root, namespaces = c.job_id_namespaces, job_id, nccl](const std::string& path) -> Result<FileStream> {
            auto p = parse_pod_log_path(root, path);
            if (!p.ok) return Status(p);
            FileStream s;
            s.labels = {{node::label::kNamespace, p.value.ns},
                        {node::label::kPod, p.value.pod},
                        {node::label::kContainer, p.value.container}};
            s.metadata = {{node::metadata::kPodUid, p.value.uid}};  // one stream per container, not per pod instance
            std::string id;
            if (std::find(namespaces.begin(), namespaces.end(), p.value.ns) != namespaces.end() && job_id->ok() &&
                RE2::FullMatch(p.value.pod, *job_id, &id) && node::valid_job_id(id))
                s.job_id = std::move(id);
            s.kind = node::StreamKind::kPod;
            for (const auto& re : nccl)
                if (re->ok() && RE2::FullMatch(p.value.container, *re)) s.kind = node::StreamKind::kNccl;
            return s;
        };
}

FileSourceConfig pod_files(const PodsConfig& c) {
    FileSourceConfig f = c.files;
    f.paths = {c.root + "/*_*_*/*/*.log"};
    f.job = c.job;
    f.max_files_per_owner = f.max_files;
    return f;
}

// A pod's logs are read by a file source.
void PodsKind::declare_metrics(metrics::Registry& m) {
    m.group<FileSourceMetrics>();
}

void PodsKind::build(const SourceContext& ctx, const Config& c, Sources& out) {
    if (!c.enabled) return;
    FileSourceOptions o = FileSourceOptions::of(ctx);
    o.labeler = pod_labeler(c);
    out.push_back(std::make_unique<FileSource>(pod_files(c), std::move(o), ctx.metrics));
}

}  // namespace jobtrail::shipper
