#pragma once

#include <array>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "shipper/lanes.hpp"
#include "shipper/sources/source.hpp"
#include "spool/spool.hpp"

// The shipper's one durable checkpoint (<state_dir>/shipper-checkpoint.json): every source's
// position together with the end of each spool lane those positions correspond to ("spool" for
// the node lane, as before lanes, and "spool_jobs"). Written after each group commit, once the
// lanes are synced; read at start to cut each lane back to it.
namespace jobtrail::shipper {

struct Checkpoint {
    nlohmann::json sources = nlohmann::json::object();             // by source name
    std::array<std::optional<spool::Position>, kLanes> spool_end;  // per lane; none: no (usable) checkpoint
    const std::optional<spool::Position>& end(Lane l) const { return spool_end[lane_index(l)]; }
};

using LaneEnds = std::array<spool::Position, kLanes>;

// A missing or damaged file counts as none: a field of the wrong type must not stop the shipper.
Checkpoint read_checkpoint(const std::string& path);
// Never throws: a source's state with bytes that are not UTF-8 (a user's file name) is written
// with those bytes replaced.
std::string checkpoint_text(const LaneEnds& spool_ends, const std::vector<std::unique_ptr<Source>>& sources);
void restore_sources(const Checkpoint& cp, std::vector<std::unique_ptr<Source>>& sources);
// Records after the checkpoint's end of the lane were spooled but their sources' positions were not
// saved: the sources will read them again, so they go (they were never sent). Without a
// checkpoint every source starts from scratch and anything unacknowledged is unaccounted.
Status recover_spool(spool::Spool& spool, Lane lane, const Checkpoint& cp);

}  // namespace jobtrail::shipper
