#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loki/push.hpp"
#include "node/schema.hpp"

namespace jobtrail::shipper {

using Metadata = std::vector<std::pair<std::string, std::string>>;

// Where lines come from: one Loki stream (labels, also in text form) and the structured
// metadata all its lines share (a file's name, a rank's pid). Made once per file or kernel
// priority and shared by its events, so a line costs no label work on the hot path.
struct Origin {
    loki::LabelSet labels;
    std::string stream;  // {cluster="c1", job="nccl", ...}
    Metadata metadata;
    node::Stream kind = node::Stream::kOther;  // what stages key on, whatever `job` is called
    std::string job_id, step;                  // the Slurm job (and step) the lines belong to, if one
    std::string_view label(const std::string& name) const {
        const auto it = labels.find(name);
        return it == labels.end() ? std::string_view() : std::string_view(it->second);
    }
};

inline std::shared_ptr<const Origin> make_origin(loki::LabelSet labels, Metadata metadata = {},
                                                 node::Stream kind = node::Stream::kOther, std::string job_id = {},
                                                 std::string step = {}) {
    auto o = std::make_shared<Origin>();
    o->stream = loki::format_labels(labels);
    o->labels = std::move(labels);
    o->metadata = std::move(metadata);
    o->kind = kind;
    o->job_id = std::move(job_id);
    o->step = std::move(step);
    return o;
}

// One line on its way from a source, through the stages, into the spool.
struct Event {
    int64_t ts_ns = 0;  // fixed here, at first read: a re-send is byte-identical
    std::shared_ptr<const Origin> origin;
    std::string line;
    Metadata metadata;  // this line's own, after the origin's (kernel seq, xid, slurm_job_id)
    bool dropped = false;
    const loki::LabelSet& labels() const { return origin->labels; }
};

struct NodeInfo {
    std::string cluster;
    std::string node;
};

// Counters exported on /metrics. Per-reason maps are guarded by mu.
struct Metrics {
    std::atomic<uint64_t> read{0}, spooled{0}, sent{0}, sent_bytes{0}, retries{0}, pushes{0}, spool_full{0},
        kmsg_lost{0};
    std::atomic<int64_t> last_success_ns{0};
    std::atomic<int64_t> oldest_pending_ns{0};  // timestamp of the oldest unacknowledged record; 0: none
    // Limits Loki named in a 429 (bytes/s; 0: none seen): the sender sizes and paces pushes below them.
    std::atomic<uint64_t> loki_tenant_rate_limit_bytes{0}, loki_stream_rate_limit_bytes{0};
    std::mutex mu;
    std::map<std::string, uint64_t> dropped;              // by reason (stage rule, too_old, ...)
    std::map<std::string, uint64_t> rejected;             // by Loki's reason (400s)
    std::map<std::string, uint64_t> files_refused;        // by reason (symlink, not_regular, ...)
    std::map<std::string, int64_t> source_backlog_bytes;  // bytes written but not yet read, per source
    std::map<std::string, int64_t> source_last_read_ns;   // newest record read, per source
    void drop(const std::string& reason, uint64_t n = 1) {
        std::lock_guard<std::mutex> lk(mu);
        dropped[reason] += n;
    }
};

}  // namespace jobtrail::shipper
