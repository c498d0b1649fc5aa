#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "config/shipper_config.hpp"
#include "loki/client.hpp"
#include "shipper/event.hpp"
#include "shipper/internal_events.hpp"
#include "shipper/metrics.hpp"
#include "spool/spool.hpp"

namespace jobtrail::shipper {

// Reads batches from the spool and pushes them to Loki, acknowledging in the spool only what
// Loki answered for: 2xx, or a 400 naming the rejected entries (counted, logged, never retried:
// Loki stored the rest). 413 splits the batch. 429, 5xx, 401/403 and transport errors retry the
// same bytes with capped, jittered exponential backoff, for as long as it takes.
class Sender {
public:
    Sender(const config::ShipperConfig& cfg, spool::Spool& spool, Metrics& m, Events events);

    // Sends one batch if there is one; false if the spool had nothing durable to send.
    bool send_batch(const std::atomic<bool>& stop);
    // Loops until stop, waiting batch_wait between empty polls.
    void run(const std::atomic<bool>& stop);
    bool busy() const { return busy_; }

private:
    bool deliver(const std::vector<const spool::Record*>& recs, size_t from, size_t to, const std::atomic<bool>& stop);
    void sleep_backoff(int attempt, const std::atomic<bool>& stop);

    const config::ShipperConfig& cfg_;
    spool::Spool& spool_;
    Metrics& m_;
    Events events_;
    loki::Client client_;
    std::atomic<bool> busy_{false};
    std::vector<spool::Record> batch_;  // reused: its strings keep their capacity between batches
};

}  // namespace jobtrail::shipper
