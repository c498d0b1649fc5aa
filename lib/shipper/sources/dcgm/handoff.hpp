#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "dcgm/client.hpp"
#include "shipper/internal_events.hpp"

// What the dcgm source's own thread and DCGM's callback threads hand to the pipeline's thread:
// everything the pipeline does with DCGM goes through here, so no pipeline pass ever waits on a
// DCGM call, and the DCGM side never touches the pipeline's metrics or events (it may outlive
// the source, held by a call DCGM never returns from).
namespace jobtrail::shipper::dcgm_source {

// One health check that answered: when it ran (µs since the epoch) and what it listed.
struct Check {
    int64_t ts_us = 0;
    std::vector<dcgm::Incident> incidents;
};

// The source's thread got through: connected, listed the GPUs, registered for violations.
struct Registered {
    int64_t ts_us = 0;
    std::string library;
    std::vector<dcgm::Gpu> gpus;
};

// What happened on the DCGM side, in order.
struct Happening {
    enum class What { kRegistered, kCheck, kConnectFailed, kLost } what = What::kCheck;
    Registered registered;  // kRegistered
    Check check;            // kCheck
    std::string error;      // kConnectFailed, kLost
    bool first = false;     // kConnectFailed: the first failure since the last connection (said once)
};

class Handoff {
public:
    explicit Handoff(size_t capacity) : capacity_(capacity) {}

    // DCGM's callback thread: takes the lock for a push only (the pipeline swaps the queue out
    // under it), never waits for room: past `capacity` the violation is dropped and counted.
    void push_violation(dcgm::Event e);
    // The source's thread. Only the newest kMaxChecks checks are kept should the pipeline not
    // poll (its spool lane full): a newer check says what is active now.
    void push(Happening h);

    // The pipeline's thread: what happened since the last take; the violations queued, swapped
    // into an empty `into` (so that the two together never hold more than `capacity`).
    std::vector<Happening> take_happenings();
    void take_violations(std::deque<dcgm::Event>& into);
    uint64_t dropped() const;  // violations dropped so far

    // The source's thread waits here between attempts and checks; stop() ends the wait at once.
    // False when stopping.
    bool wait_ms(int64_t ms);
    void stop();
    bool stopping() const;
    // The thread says it has returned (the source's destructor waits for it, bounded).
    void exited();
    bool wait_exited_ms(int64_t ms);

    static constexpr size_t kMaxChecks = 8;
    static constexpr size_t kMaxHappenings = 64;

private:
    const size_t capacity_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<dcgm::Event> violations_;
    std::deque<Happening> happenings_;
    uint64_t dropped_ = 0;
    bool stop_ = false, exited_ = false;
};

}  // namespace jobtrail::shipper::dcgm_source
