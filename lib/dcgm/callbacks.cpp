#include "dcgm/callbacks.hpp"

#include <array>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <utility>

#include "dcgm/convert.hpp"

namespace jobtrail::dcgm::callbacks {
namespace {

struct Table {
    std::mutex mu;
    // Held by the table and by a callback running the sink, so that remove() need not wait for one.
    std::map<uint64_t, std::shared_ptr<const Target>> targets;
    std::array<uint64_t, api::kMaxNumDevices> slots{};  // 3.x: the ticket of each callback function (0: free)
    uint64_t next = 1;
    // Withdrawn tickets whose sink may still be running on a DCGM thread.
    std::map<uint64_t, int> running;
    std::condition_variable_any idle;
};

Table& table() {
    static Table* t = new Table;  // never destroyed: DCGM's threads may call in during exit
    return *t;
}

void deliver(const void* response, size_t size, uint64_t ticket, bool from_slot, size_t slot) {
    Table& t = table();
    std::shared_ptr<const Target> target;
    {
        std::lock_guard lock(t.mu);
        if (from_slot) ticket = t.slots[slot];
        const auto it = t.targets.find(ticket);
        if (it == t.targets.end()) return;
        target = it->second;
        ++t.running[ticket];
    }
    std::string error;
    if (auto event = convert_violation(response, size, target->major, target->gpu, error)) {
        const auto bdf = target->pci_bdf.find(event->gpu);
        if (bdf != target->pci_bdf.end()) event->pci_bdf = bdf->second;
        target->sink(std::move(*event));
    }
    std::lock_guard lock(t.mu);
    if (--t.running[ticket] == 0) t.running.erase(ticket);
    t.idle.notify_all();
}

template <size_t N>
int on_violation3(void* response) {
    deliver(response, sizeof(api::PolicyCallbackResponseV1), 0, true, N);
    return 0;
}

template <size_t... N>
constexpr std::array<api::RecvUpdates3, sizeof...(N)> functions(std::index_sequence<N...>) {
    return {&on_violation3<N>...};
}
constexpr auto kFunctions = functions(std::make_index_sequence<api::kMaxNumDevices>());

}  // namespace

uint64_t add(Target target) {
    Table& t = table();
    std::lock_guard lock(t.mu);
    const uint64_t ticket = t.next++;
    t.targets[ticket] = std::make_shared<const Target>(std::move(target));
    return ticket;
}

int on_violation(api::PolicyCallbackResponseV2* response, uint64_t ticket) {
    deliver(response, sizeof(*response), ticket, false, 0);
    return 0;
}

std::optional<std::pair<uint64_t, api::RecvUpdates3>> add3(Target target) {
    Table& t = table();
    std::lock_guard lock(t.mu);
    for (size_t i = 0; i < t.slots.size(); ++i) {
        if (t.slots[i] != 0) continue;
        const uint64_t ticket = t.next++;
        t.slots[i] = ticket;
        t.targets[ticket] = std::make_shared<const Target>(std::move(target));
        return std::make_pair(ticket, kFunctions[i]);
    }
    return std::nullopt;
}

void remove(uint64_t ticket) {
    Table& t = table();
    std::unique_lock lock(t.mu);
    t.targets.erase(ticket);
    for (auto& s : t.slots)
        if (s == ticket) s = 0;
    // A sink never blocks, so a delivery in progress ends soon; after this none starts.
    t.idle.wait(lock, [&] { return t.running.count(ticket) == 0; });
}

}  // namespace jobtrail::dcgm::callbacks
