#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loki/push.hpp"
#include "node/schema.hpp"
#include "spool/record.hpp"

namespace jobtrail::shipper {

using Metadata = std::vector<std::pair<std::string, std::string>>;

// Where lines come from: one Loki stream (labels, also in text form) and the structured
// metadata all its lines share (a file's name, a rank's pid). Made once per file or kernel
// priority and shared by its events, so a line costs no label work on the hot path.
struct Origin {
    loki::LabelSet labels;
    std::string stream;  // {cluster="c1", job="nccl", ...}
    Metadata metadata;
    node::StreamKind kind = node::StreamKind::kOther;  // what stages key on, whatever `job` is called
    std::string job_id, step;                          // the Slurm job (and step) the lines belong to, if one
    // job_id is the Slurm job's by the node contract (the path the plugin made), not a name a pod
    // was given: the lines may draw from the job's user's NCCL budget.
    bool slurm_job = false;
    // Said on the first of its lines that reaches the spool, and again once ten minutes of its
    // lines' time have passed (NCCL's step: the lines' own host:pid prefix names the process,
    // the process one step, and Loki pays for every byte of every line). Not on every line.
    Metadata first_line_metadata;
    static constexpr int64_t kSayAgainNs = 600'000'000'000;
    mutable bool first_line_said = false;  // only the pipeline's thread looks
    mutable int64_t first_line_said_ns = 0;
    std::string_view label(const std::string& name) const {
        const auto it = labels.find(name);
        return it == labels.end() ? std::string_view() : std::string_view(it->second);
    }
};

inline std::shared_ptr<const Origin> make_origin(loki::LabelSet labels, Metadata metadata = {},
                                                 node::StreamKind kind = node::StreamKind::kOther,
                                                 std::string job_id = {}, std::string step = {},
                                                 Metadata first_line_metadata = {}, bool slurm_job = false) {
    auto o = std::make_shared<Origin>();
    o->stream = loki::format_labels(labels);
    o->labels = std::move(labels);
    o->metadata = std::move(metadata);
    o->kind = kind;
    o->job_id = std::move(job_id);
    o->step = std::move(step);
    o->first_line_metadata = std::move(first_line_metadata);
    o->slurm_job = slurm_job;
    return o;
}

// One line on its way from a source, through the stages, into the spool.
struct Event {
    int64_t ts_ns = 0;  // fixed here, at first read: a re-send is byte-identical
    std::shared_ptr<const Origin> origin;
    std::string line;
    Metadata metadata;  // this line's own, after the origin's (kernel seq, xid, slurm_job_id)
    bool dropped = false;
    bool kernel_facility = false;  // a kmsg record the kernel wrote (not a root process's text)
    // The device a kernel record names (events::Event::pci_bdf), what the stages attribute it by;
    // also sent, as metadata.
    std::string pci_bdf = {};
    const loki::LabelSet& labels() const { return origin->labels; }
};

// An origin's first-line metadata onto `e`, when no line of it has carried it yet (or not for
// ten minutes: a bundle whose window starts later, or a first line Loki refused). Called for
// the lines the stages kept: a dropped first line must not take the origin's news with it.
inline void add_first_line_metadata(Event& e) {
    const Origin& o = *e.origin;
    if (o.first_line_metadata.empty()) return;
    if (o.first_line_said && e.ts_ns - o.first_line_said_ns < Origin::kSayAgainNs) return;
    e.metadata.insert(e.metadata.end(), o.first_line_metadata.begin(), o.first_line_metadata.end());
    o.first_line_said = true;
    o.first_line_said_ns = e.ts_ns;
}

struct NodeInfo {
    std::string cluster;
    std::string node;
};

}  // namespace jobtrail::shipper
