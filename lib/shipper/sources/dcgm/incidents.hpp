#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "dcgm/event.hpp"
#include "shipper/sources/dcgm/handoff.hpp"

namespace jobtrail::shipper::dcgm_source {

// The health incidents shipped as active, so that each is a line when it appears and when it
// clears, not on every check. An incident is its GPU, DCGM_FR_* code and system; a new verdict
// (warn to fail) is a new line, a new message alone is not (DCGM's messages quote readings that
// change from check to check). Kept in the source's checkpoint: after a restart an incident
// DCGM still reports is not shipped again, and one that cleared meanwhile is shipped as cleared
// at the first check.
class ActiveIncidents {
public:
    using BusId = std::function<std::string(unsigned gpu)>;  // DCGM's PCI bus id of a GPU, or ""
    // The lines a check makes, stamped with its time: incidents new or with a new verdict, then
    // those gone (cleared).
    std::vector<dcgm::Event> apply(const Check& check, const BusId& bus_id);

    nlohmann::json to_json() const;
    // Entries that are not an incident (a checkpoint from elsewhere) are skipped; at most kMax.
    void from_json(const nlohmann::json& j);

    // DCGM lists at most 64 incidents per check in 3.x (dcgmHealthResponse_v4), 1024 in 4.x
    // (v5); a checkpoint holding more was not written by this source.
    static constexpr size_t kMax = 1024;

private:
    using Key = std::tuple<unsigned, std::string, std::string>;  // gpu, code, system
    std::map<Key, std::string> active_;                          // -> health (warn, fail)
};

}  // namespace jobtrail::shipper::dcgm_source
