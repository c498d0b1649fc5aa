#include "shipper/sources/dcgm/worker.hpp"

#include <algorithm>

#include "common/time.hpp"

namespace jobtrail::shipper::dcgm_source {
namespace {

int64_t now_us() {
    return realtime_ns() / 1000;
}

// Connected and registered, or the reason why not.
bool attach(dcgm::Client& client, Handoff& handoff, const std::shared_ptr<Handoff>& sink_handoff, std::string& error) {
    if (!client.connect(error)) return false;
    std::string gpus_error;
    Registered r;
    r.gpus = client.gpus(gpus_error);
    if (!gpus_error.empty()) {
        error = "listing the GPUs: " + gpus_error;
        return false;
    }
    // DCGM's thread calls this: a push under a short lock, never a wait for room.
    auto sink = [h = sink_handoff](dcgm::Event e) { h->push_violation(std::move(e)); };
    if (!client.watch_violations(sink, error)) {
        error = "registering for violations: " + error;
        return false;
    }
    r.ts_us = now_us();
    r.library = client.library();
    handoff.push({Happening::What::kRegistered, std::move(r), {}, {}, false});
    return true;
}

}  // namespace

// By value: the thread owns them, and may outlive the source (detached after a stuck call).
// NOLINTNEXTLINE(performance-unnecessary-value-param)
void run_worker(std::shared_ptr<dcgm::Client> client, std::shared_ptr<Handoff> handoff, WorkerTiming timing) {
    int64_t backoff_ms = timing.retry_min_ms;
    bool down_said = false;  // one notice per outage
    while (!handoff->stopping()) {
        std::string error;
        if (!attach(*client, *handoff, handoff, error)) {
            client->disconnect();
            if (handoff->stopping()) break;
            handoff->push({Happening::What::kConnectFailed, {}, {}, error, !down_said});
            down_said = true;
            if (!handoff->wait_ms(backoff_ms)) break;
            backoff_ms = std::min(backoff_ms * 2, timing.retry_max_ms);
            continue;
        }
        down_said = false;
        bool answered = false;  // a health check of this connection worked
        while (true) {
            const int64_t ts = now_us();
            auto incidents = client->health(error);
            if (handoff->stopping()) break;
            if (!incidents) {
                // A host engine restart drops every registration: connect and register again,
                // at once after a connection that worked; after one whose every check failed
                // (an engine that connects but refuses the check), with backoff, not in a loop.
                client->disconnect();
                handoff->push({Happening::What::kLost, {}, {}, error, false});
                down_said = true;
                if (!answered) {
                    if (!handoff->wait_ms(backoff_ms)) break;
                    backoff_ms = std::min(backoff_ms * 2, timing.retry_max_ms);
                }
                break;
            }
            answered = true;
            backoff_ms = timing.retry_min_ms;
            handoff->push({Happening::What::kCheck, {}, {ts, std::move(*incidents)}, {}, false});
            if (!handoff->wait_ms(timing.health_interval_ms)) break;
        }
    }
    client->disconnect();
    handoff->exited();
}

}  // namespace jobtrail::shipper::dcgm_source
