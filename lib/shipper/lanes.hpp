#pragma once

#include <cstddef>
#include <string_view>

#include "node/schema.hpp"

namespace jobtrail::shipper {

// The spool is split in lanes, each with its own disk queue, size share and sender, so that a
// job's NCCL output (a user's, as fast and as much as they like, against Loki's per-stream
// limit) never waits in front of the node's own records: the kernel's, the prolog/epilog logs',
// journald's, the fabric manager's and the shipper's. Pods' output is their users' too: jobs lane. A full jobs lane
// pauses the NCCL sources only; the kernel keeps being read, so its ring cannot overrun because of a job.
enum class Lane : unsigned char { kNode, kJobs };
inline constexpr size_t kLanes = 2;

inline constexpr Lane lane_of(node::StreamKind kind) {
    return kind == node::StreamKind::kNccl || kind == node::StreamKind::kPod ? Lane::kJobs : Lane::kNode;
}

inline constexpr std::string_view lane_name(Lane l) {
    return l == Lane::kJobs ? "jobs" : "node";
}

inline constexpr size_t lane_index(Lane l) {
    return static_cast<size_t>(l);
}

}  // namespace jobtrail::shipper
