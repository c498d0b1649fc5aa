#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "config/shipper_config.hpp"
#include "loki/response.hpp"
#include "shipper/internal_events.hpp"

namespace jobtrail::shipper {

// What Loki's answer to a push means for the stream pushed: the Sender's response policy, with
// no threads, clock or I/O (the time is given; the jitter comes from a seeded generator), so
// that each answer's consequence is tested on its own. It keeps each stream's pace, retries and
// what Loki's answers taught in a Stream the Sender holds, the tenant's in itself, and says what
// the Sender is to do in a Decision.
//
// Answers: 2xx: all stored. 400: Loki stored the rest; the rejected entries are counted by
// reason, never retried. 413: the piece is halved. A 429 that names a plausible limit (tenant
// rate, per-stream rate) shrinks that stream's pieces below it and paces the stream at the
// named rate, never waiting longer than max_backoff; a single entry over a per-stream limit it
// can never fit is counted rejected. A 429 naming no usable limit (none, a unit we cannot read,
// Loki's 8EB after a restart) halves the stream's pieces down to one entry, and they grow back
// with each success. What was learned is probed again after kReprobeNs. A held-back stream
// says so in the log, once a minute at most. 5xx, 401/403 and transport errors retry with
// capped, jittered exponential backoff, for as long as it takes.
class ResponsePolicy {
public:
    // A rate Loki names above this is not a limit: no Loki takes a terabyte a second, and right
    // after a restart it names its WAL replay's unlimited rate as 8EB (reference §12).
    static constexpr uint64_t kMaxPlausibleRate = 1ULL << 40;
    // Nor is one below a kilobyte a second: Loki's limits are kilobytes and up, and one such
    // answer (a proxy's, a forged one) paced a healthy stream at a line every half minute.
    static constexpr uint64_t kMinPlausibleRate = 1ULL << 10;
    // What Loki's answers taught (a stream's rate and request cap, the tenant's) is probed again
    // after this long: limits change, and an answer may have been wrong.
    static constexpr int64_t kReprobeNs = 300'000'000'000;
    // A stream held back by Loki says so at most this often.
    static constexpr int64_t kSayEveryNs = 60'000'000'000;

    // One stream's pace and retries, and what Loki's answers taught of it.
    struct Stream {
        int64_t next_try_ns = 0;  // its next request not before this (monotonic)
        int attempt = 0;          // tries in a row that stored nothing, for the backoff
        uint64_t cap_bytes = 0;   // largest request this stream may send (0: batch_max_bytes)
        bool cap_grows = false;   // cap halved for a 429 that named no limit: it grows back on success
        uint64_t rate_bps = 0;    // per-stream rate Loki named; pushes paced at it
        int single_refusals = 0;  // a lone entry refused by the per-stream rate limit, in a row
        int64_t learned_ns = 0;   // when rate_bps or cap_bytes was last taught by Loki (0: never)
        int64_t said_ns = 0;      // when its being held back was last logged
        // When its tries began to fail for no answer, a 5xx or 401/403 (0: its last try stored).
        int64_t failing_since_ns = 0;
    };
    // What the tenant's 429s taught: it limits every stream of the lane.
    struct Tenant {
        uint64_t cap = 0;   // learned from the tenant's rate limit (0: none)
        uint64_t rate = 0;  // the tenant's rate limit Loki last named (0: none)
        int64_t learned_ns = 0, said_ns = 0;
    };
    // The request answered: its entries, what rate limits count of them (lines, metadata and a
    // byte an entry), and its lines' bytes.
    struct Sent {
        uint64_t entries = 0;
        uint64_t bytes = 0;
        uint64_t line_bytes = 0;
    };
    enum class Action {
        kStored,    // all of it stored: the stream goes on
        kRejected,  // Loki stored the rest: the rejected entries are counted, never sent again
        kDropped,   // its one entry Loki will never take: counted rejected, the stream goes on
        kSplit,     // too large: the same entries again at once, in requests of half its size
        kPaced,     // the stream's rate limit: the same entries again when its bucket has refilled
        kBackoff,   // the same entries again after a jittered exponential backoff
    };
    // A line for the shipper's log, from the "sender" component.
    struct Say {
        Severity severity = Severity::kWarning;
        std::string_view event;
        std::string text;
    };
    struct Decision {
        Action action = Action::kBackoff;
        bool retry = false;  // a 429, 5xx, 401/403 or no answer: counted as a retry
        // Entries Loki has of it and their lines' bytes (kStored, kRejected).
        uint64_t stored_entries = 0, stored_bytes = 0;
        // Refused for good, by reason: the answer's counts (a view into the answer decided on),
        // those its body left unreported, and the one entry of kDropped.
        const std::map<std::string, uint64_t>* rejected = nullptr;
        uint64_t unreported = 0;
        std::string_view dropped_reason;
        // Limits taken from the answer (0: none), for the metrics.
        uint64_t stream_rate_limit = 0, tenant_rate_limit = 0;
        // Stored after the lane's pushes had failed (no answer, 5xx, 401/403) since this time:
        // Loki is back, and the streams that failed meanwhile go again now (recovered()).
        int64_t outage_since_ns = 0;
        std::optional<Say> say;

        // What was sent is answered for: the stream's next entries go next.
        bool settles() const {
            return action == Action::kStored || action == Action::kRejected || action == Action::kDropped;
        }
        bool stored() const { return action == Action::kStored || action == Action::kRejected; }
        bool counts_rejected() const { return rejected || !dropped_reason.empty(); }
        // Adds the entries refused for good to `by_reason`.
        void count_rejected(std::map<std::string, uint64_t>& by_reason) const;
    };

    ResponsePolicy(const config::ShipperConfig& cfg, uint32_t seed) : cfg_(cfg), rng_(seed) {}
    // For tests: probe learned limits again after `ns` instead of kReprobeNs.
    void set_reprobe_after(int64_t ns) { reprobe_ns_ = ns; }
    const Tenant& tenant() const { return tenant_; }

    // The largest request the stream may send now; what was learned long enough ago is
    // forgotten first, to be probed again.
    uint64_t request_cap(Stream& s, int64_t now);
    // Loki's answer `v` (or `transport_error` when none came) to the request `sent` of `stream`.
    Decision decide(Stream& s, std::string_view stream, const Sent& sent, const loki::PushResponse& v,
                    std::string_view transport_error, int64_t now);
    // Loki stored a push after an outage that began at `since` (Decision::outage_since_ns): a
    // stream whose tries began to fail in it waits no longer for its backoff, which grew with
    // the outage. One that began to fail while Loki stored others keeps its own: it is not Loki.
    static void recovered(Stream& s, int64_t since, int64_t now);

private:
    void rate_limited(Stream& s, std::string_view stream, const Sent& sent, const loki::PushResponse& v, int64_t now,
                      Decision& d);
    void pace(Stream& s, const Sent& sent, int64_t now) const;
    void backoff(Stream& s, int64_t now);

    const config::ShipperConfig& cfg_;
    std::mt19937 rng_;  // the backoff's jitter
    int64_t reprobe_ns_ = kReprobeNs;
    Tenant tenant_;
    int64_t failing_since_ns_ = 0;  // the lane's first failed push since one was last stored
};

}  // namespace jobtrail::shipper
