#pragma once

#include <cstdint>
#include <memory>

#include "dcgm/client.hpp"
#include "shipper/sources/dcgm/handoff.hpp"

namespace jobtrail::shipper::dcgm_source {

struct WorkerTiming {
    int64_t health_interval_ms = 30'000;
    // After a failed attempt: wait retry_min_ms, doubling up to retry_max_ms, until one works.
    int64_t retry_min_ms = 1'000;
    int64_t retry_max_ms = 60'000;
};

// The dcgm source's one thread, which makes every DCGM call: connect, list the GPUs, register for
// violations, then a health check every interval; a failed check means the connection is lost (a
// host engine restart drops its registrations): reconnect and register again at once if the
// connection had a good check, and after a failed attempt (or a connection whose every check
// failed) retry with backoff. It reports through the handoff only, and returns once
// handoff.stop() is called (within the client's call timeout when a call is under way).
// `client` and `handoff` are shared with the thread, which may outlive its source.
void run_worker(std::shared_ptr<dcgm::Client> client, std::shared_ptr<Handoff> handoff, WorkerTiming timing);

}  // namespace jobtrail::shipper::dcgm_source
