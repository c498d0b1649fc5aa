#pragma once

#include <functional>
#include <string>

#include "common/result.hpp"
#include "loki/push.hpp"
#include "node/schema.hpp"
#include "shipper/event.hpp"
#include "shipper/sources/file/config.hpp"

namespace jobtrail::shipper {

// What a file's stream is, from its path: labels beyond cluster, node, job and service_name, the
// metadata its lines carry, its Slurm job, its kind for the stages, and what its lines need of
// it. A files source's are the node contract's (contract_labeler); a kind of source built on the
// file source (pods/) names its own. An error refuses the file: counted and said like a link,
// never read.
struct FileStream {
    loki::LabelSet labels;
    Metadata metadata;  // every line's
    std::string job_id;
    node::StreamKind kind = node::StreamKind::kOther;
    std::string step;              // the Slurm step, for the stages
    bool slurm_job = false;        // job_id from the node contract's path (Origin::slurm_job)
    Metadata first_line_metadata;  // said on its first line shipped (Origin), not on every line
    std::string phase;             // prolog or epilog: put before each job log line
    // "host:pid:" its lines begin with (after the stamp) when the name is one of ours: such
    // lines carry only the step, the others the file's name as well.
    std::string nccl_prefix, file_name;
};
using Labeler = std::function<Result<FileStream>(const std::string& path)>;

// The node contract's names: job logs give their job and phase, NCCL files their job and step.
// Of the `nccl` format, which file a line came from is metadata (never a label: it would
// multiply streams). Every file is `kind`; none is refused.
Labeler contract_labeler(LineFormat format, node::StreamKind kind);

}  // namespace jobtrail::shipper
