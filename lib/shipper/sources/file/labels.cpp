#include "shipper/sources/file/labels.hpp"

#include <optional>

#include "node/layout.hpp"
#include "node/nccl_file.hpp"
#include "node/schema.hpp"
#include "shipper/sources/file/file_source.hpp"

namespace jobtrail::shipper {

Labeler contract_labeler(LineFormat format, node::StreamKind kind) {
    return [format, kind](const std::string& path) -> Result<FileStream> {
        FileStream s;
        s.kind = kind;
        std::optional<node::NcclFile> nccl;
        if (const auto jl = node::parse_job_log(path)) {
            s.phase = std::string(node::phase_name(jl->phase));
            s.job_id = jl->job_id;
            s.slurm_job = true;
            s.metadata.emplace_back(node::metadata::kPhase, s.phase);
        } else if ((nccl = node::parse_nccl_file(path))) {
            s.job_id = nccl->job_id;
            s.slurm_job = true;
            s.step = nccl->step;
        }
        if (format == LineFormat::kNccl) {
            // One stream per job and node: which file a line came from is metadata (the bundle
            // writes one file per file). The name is <step>.<host>.<pid>.log and NCCL's line
            // prefix says host:pid:tid: the step goes on the file's first line shipped (a process
            // is one step's, so its host:pid names the step from then on), and the name on a line
            // that does not say where it came from (Loki pays for every byte of every line).
            s.file_name = path.substr(path.rfind('/') + 1);
            if (nccl && node::plain_name_part(nccl->step) && node::plain_name_part(nccl->host)) {
                s.first_line_metadata.emplace_back(node::metadata::kStep, nccl->step);
                s.nccl_prefix = nccl->host + ":" + nccl->pid + ":";
            } else {
                s.metadata.emplace_back(node::metadata::kFile, s.file_name);
            }
        }
        return s;
    };
}

FileStream FileSource::stream_of(const std::string& path) const {
    // Checked by the scan; a file found again under a rotated name keeps what its name gives.
    if (auto r = labeler_(path); r.ok) return std::move(r.value);
    FileStream s;
    s.kind = cfg_.stream;
    return s;
}

void FileSource::label(Tracked& t, FileStream s) {
    loki::LabelSet labels = {{node::label::kCluster, node_.cluster},
                             {node::label::kNode, node_.node},
                             {node::label::kJob, cfg_.job},
                             {node::label::kServiceName, cfg_.job}};
    for (auto& [k, v] : s.labels) labels[k] = std::move(v);
    for (const auto& [k, v] : cfg_.labels) labels[k] = v;
    if (!s.job_id.empty()) labels[node::label::kJobId] = s.job_id;
    t.phase = std::move(s.phase);
    t.nccl_prefix = std::move(s.nccl_prefix);
    t.file_name = std::move(s.file_name);
    t.origin = make_origin(std::move(labels), std::move(s.metadata), s.kind, std::move(s.job_id), std::move(s.step),
                           std::move(s.first_line_metadata), s.slurm_job);
}

}  // namespace jobtrail::shipper
