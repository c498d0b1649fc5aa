#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "dcgm/client.hpp"
#include "dcgm/event.hpp"

// DCGM's answers, as the raw bytes the library hands over, into jobtrail's events: a policy
// callback's response into an Event, a health check's response into Incidents. The bytes are
// DCGM's (or a stand-in's), so nothing is trusted: sizes, versions, condition bits, counts and
// strings are all checked (fuzzed: tests/fuzz/fuzz_dcgm_convert.cpp).
namespace jobtrail::dcgm {

// A dcgmPolicyCallbackResponse of the major's version (4: v2, which names the GPU; 3: v1, which
// does not: `gpu` is then the GPU of the group the callback was registered for). nullopt with
// `error` for a wrong size or version or a condition that is not exactly one known bit.
std::optional<Event> convert_violation(const void* response, size_t size, int major, unsigned gpu, std::string& error);

// A dcgmHealthResponse of the major's version (4: v5, 3: v4): its incidents on GPUs (other
// entities, e.g. NVSwitches, are left out). nullopt with `error` for a wrong size or version;
// `error` is also set (with the incidents returned) when the count was beyond the array.
std::optional<std::vector<Incident>> convert_health(const void* response, size_t size, int major, std::string& error);

// The DCGM_FR_* name of a health error code (dcgm_errors.h), "DCGM_FR_<n>" for others.
std::string fr_name(unsigned code);
// The name of a dcgmHealthSystems_t bit (pcie, nvlink, ...), "system_0x<hex>" for others.
std::string system_name(unsigned bits);

}  // namespace jobtrail::dcgm
