#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "dcgm/api.hpp"
#include "dcgm/event.hpp"

// Where DCGM's policy callbacks, on DCGM's own threads, find the sink of the client that
// registered them. Each registration holds a ticket; a withdrawn ticket makes later callbacks
// (DCGM may still be delivering one) do nothing, so a client can go away whatever DCGM does.
// 4.x passes the ticket back as the callback's userData; 3.x passes nothing, so each 3.x
// registration gets one of DCGM_MAX_NUM_DEVICES distinct callback functions instead.
namespace jobtrail::dcgm::callbacks {

struct Target {
    std::function<void(Event)> sink;
    int major = 4;
    unsigned gpu = 0;                         // 3.x: the GPU of the registration's group
    std::map<unsigned, std::string> pci_bdf;  // by GPU id, for the events' metadata
};

// 4.x: the ticket to pass as userData with on_violation.
uint64_t add(Target target);
int on_violation(api::PolicyCallbackResponseV2* response, uint64_t ticket);

// 3.x: the ticket and the callback function for it; nullopt when all slots are taken.
std::optional<std::pair<uint64_t, api::RecvUpdates3>> add3(Target target);

// Withdraws a ticket: once this returns, its sink is not called again.
void remove(uint64_t ticket);

}  // namespace jobtrail::dcgm::callbacks
