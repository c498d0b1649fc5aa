#include "shipper/sender/policy.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

using namespace jobtrail;
using shipper::ResponsePolicy;
using Action = ResponsePolicy::Action;

namespace {

constexpr int64_t kSecond = 1'000'000'000;
constexpr int64_t kNow = 1'000 * kSecond;  // any monotonic time; the policy reads no clock
const std::string kStream = "{job=\"a\", service_name=\"a\"}";

// Loki's answers as the classifier gives them (its parsing is tested in loki/response_test.cpp).
loki::PushResponse answer(long status, loki::Verdict verdict, std::string message = "") {
    loki::PushResponse v;
    v.status = status;
    v.verdict = verdict;
    v.first_message = std::move(message);
    return v;
}
loki::PushResponse stored() {
    return answer(204, loki::Verdict::kAccepted);
}
// Loki 3's per-stream refusal of `entries` entries, naming `limit` bytes/s (0: in a unit not read).
loki::PushResponse per_stream_429(uint64_t entries, uint64_t limit) {
    auto v = answer(429, loki::Verdict::kRetry, "Per stream rate limit exceeded");
    v.rejected["per_stream_rate_limit"] = entries;
    v.stream_rate_limit = limit;
    return v;
}
loki::PushResponse tenant_429(uint64_t limit) {
    auto v = answer(429, loki::Verdict::kRetry, "Ingestion rate limit exceeded for user fake");
    v.rejected["rate_limited"] = 1;
    v.tenant_rate_limit = limit;
    return v;
}
loki::PushResponse nameless_429() {
    return answer(429, loki::Verdict::kRetry, "<html><body>Too Many Requests</body></html>");
}

struct Rig {
    config::ShipperConfig cfg = [] {
        auto c = config::default_shipper_config();
        c.batch_max_bytes = 1 << 20;
        c.max_stream_rate = 0;  // Loki's answers are under test; our own pace has its own case
        c.min_backoff_ms = 500;
        c.max_backoff_ms = 30'000;
        return c;
    }();
    ResponsePolicy policy{cfg, 42};
    ResponsePolicy::Stream s;
    ResponsePolicy::Decision decide(const loki::PushResponse& v, ResponsePolicy::Sent sent, int64_t now = kNow,
                                    std::string_view error = "") {
        return policy.decide(s, kStream, sent, v, error, now);
    }
};

std::map<std::string, uint64_t> rejected(const ResponsePolicy::Decision& d) {
    std::map<std::string, uint64_t> by_reason;
    d.count_rejected(by_reason);
    return by_reason;
}

}  // namespace

TEST_CASE("policy: a 2xx settles the request, every entry and line byte stored, tries counted afresh",
          "[sender][policy]") {
    Rig rig;
    rig.s.attempt = 3;
    rig.s.single_refusals = 2;
    const auto d = rig.decide(stored(), {10, 1'010, 1'000});
    CHECK(d.action == Action::kStored);
    CHECK(d.settles());
    CHECK(d.stored());
    CHECK_FALSE(d.retry);
    CHECK(d.stored_entries == 10);
    CHECK(d.stored_bytes == 1'000);
    CHECK_FALSE(d.counts_rejected());
    CHECK_FALSE(d.say);
    CHECK(rig.s.attempt == 0);
    CHECK(rig.s.single_refusals == 0);
    CHECK(rig.s.next_try_ns == 0);  // no rate to pace at: the next request goes at once
}

TEST_CASE("policy: a 400 counts the rejected by reason and the entries Loki left unreported, the rest stored",
          "[sender][policy]") {
    struct Row {
        const char* what;
        std::map<std::string, uint64_t> body;  // the reasons the body counts
        uint64_t total_entries;                // its "out of M" (0: none)
        uint64_t known_entries, known_bytes;   // rejected entries whose length it gives
        std::map<std::string, uint64_t> counted;
        uint64_t stored_entries, stored_bytes;
    };
    // 33 entries of 330 line bytes sent.
    const Row rows[] = {
        {"every rejected entry named, none with its length",
         {{"too_far_behind", 30}},
         33,
         0,
         0,
         {{"too_far_behind", 30}},
         3,
         330 - 330 * 30 / 33},
        {"fewer reached the ingester than were sent",
         {{"out_of_order", 2}},
         30,
         0,
         0,
         {{"out_of_order", 2}, {"unreported", 3}},
         28,
         330 - 330 * 5 / 33},
        {"lengths given: the accepted bytes are exact",
         {{"line_too_long", 3}},
         0,
         3,
         300,
         {{"line_too_long", 3}},
         30,
         30},
    };
    for (const auto& row : rows) {
        INFO(row.what);
        Rig rig;
        auto v = answer(400, loki::Verdict::kRejected, "entry out of order");
        v.rejected = row.body;
        v.total_entries = row.total_entries;
        v.rejected_known_entries = row.known_entries;
        v.rejected_known_bytes = row.known_bytes;
        const auto d = rig.decide(v, {33, 363, 330});
        CHECK(d.action == Action::kRejected);
        CHECK(d.settles());
        CHECK(d.stored());
        CHECK_FALSE(d.retry);
        CHECK(rejected(d) == row.counted);
        CHECK(d.stored_entries == row.stored_entries);
        CHECK(d.stored_bytes == row.stored_bytes);
        REQUIRE(d.say);
        CHECK(d.say->event == "rejected");
        CHECK(d.say->severity == shipper::Severity::kWarning);
        CHECK(d.say->text.rfind(
                  "Loki rejected " + std::to_string(33 - row.stored_entries) + " of 33 entries (HTTP 400)", 0) == 0);
    }
}

TEST_CASE("policy: a 413 halves a request of many entries and drops a request of one", "[sender][policy]") {
    Rig rig;
    const auto v = answer(413, loki::Verdict::kSplit, "request body too large");
    auto d = rig.decide(v, {100, 20'000, 19'900});
    CHECK(d.action == Action::kSplit);
    CHECK_FALSE(d.settles());
    CHECK_FALSE(d.retry);
    CHECK_FALSE(d.say);
    CHECK(rig.s.cap_bytes == 10'000);
    CHECK_FALSE(rig.s.cap_grows);  // a size Loki refused stays refused
    CHECK(rig.s.learned_ns == kNow);
    CHECK(rig.s.next_try_ns == 0);  // again at once, smaller
    CHECK(rig.policy.request_cap(rig.s, kNow) == 10'000);

    d = rig.decide(v, {1, 5'001, 5'000});
    CHECK(d.action == Action::kDropped);
    CHECK(d.settles());
    CHECK_FALSE(d.stored());
    CHECK(rejected(d) == std::map<std::string, uint64_t>{{"request_too_large", 1}});
    REQUIRE(d.say);
    CHECK(d.say->event == "entry_too_large");
}

TEST_CASE("policy: a per-stream 429 naming a plausible limit caps the stream below it and paces it at it",
          "[sender][policy]") {
    Rig rig;
    const uint64_t limit = 64 << 10;
    auto d = rig.decide(per_stream_429(100, limit), {100, 100'000, 99'900});
    CHECK(d.action == Action::kPaced);
    CHECK(d.retry);
    CHECK_FALSE(d.settles());
    CHECK(d.stream_rate_limit == limit);
    CHECK(rig.s.rate_bps == limit);
    CHECK(rig.s.cap_bytes == limit * 3 / 4);  // room for the burst to refill
    CHECK(rig.policy.request_cap(rig.s, kNow) == limit * 3 / 4);
    CHECK(rig.s.next_try_ns == kNow + int64_t(100'000) * kSecond / int64_t(limit));
    CHECK(rig.s.attempt == 0);  // paced, not backed off
    REQUIRE(d.say);
    CHECK(d.say->event == "stream_rate_limited");
    CHECK(d.say->text == "Loki's per-stream rate limit (65536 bytes/s) holds back " + kStream +
                             "; pacing it at that rate (data stays in the spool)");

    // Refused again at its cap after the paced wait: the burst is smaller than the piece.
    d = rig.decide(per_stream_429(40, limit), {40, 40'000, 39'960}, kNow + 2 * kSecond);
    CHECK(d.action == Action::kPaced);
    CHECK(rig.s.cap_bytes == 20'000);
    // Refused again at exactly that cap: halved again.
    d = rig.decide(per_stream_429(20, limit), {20, 20'000, 19'980}, kNow + 4 * kSecond);
    CHECK(d.action == Action::kPaced);
    CHECK(rig.s.cap_bytes == 10'000);
}

TEST_CASE("policy: a lone entry the per-stream limit refuses three times is dropped, counted", "[sender][policy]") {
    Rig rig;
    for (int i = 0; i < 2; ++i)
        CHECK(rig.decide(per_stream_429(1, 1 << 10), {1, 5'001, 5'000}).action == Action::kPaced);
    const auto d = rig.decide(per_stream_429(1, 1 << 10), {1, 5'001, 5'000});
    CHECK(d.action == Action::kDropped);
    CHECK(d.retry);
    CHECK(d.settles());
    CHECK(rejected(d) == std::map<std::string, uint64_t>{{"per_stream_rate_limit", 1}});
    REQUIRE(d.say);
    CHECK(d.say->event == "entry_over_stream_limit");
    CHECK(d.say->text.find("one entry of 5000 bytes three times") != std::string::npos);
    CHECK(rig.s.single_refusals == 0);
}

TEST_CASE("policy: a 429 naming 8EB is no limit: the stream's requests are halved and it backs off",
          "[sender][policy]") {
    Rig rig;
    const auto d = rig.decide(per_stream_429(100, 8ULL << 60), {100, 100'000, 99'900});
    CHECK(d.action == Action::kBackoff);
    CHECK(d.retry);
    CHECK(d.stream_rate_limit == 0);  // not taken
    CHECK(rig.s.rate_bps == 0);
    CHECK(rig.s.cap_bytes == 50'000);
    CHECK(rig.s.cap_grows);
    CHECK(rig.s.attempt == 1);
    REQUIRE(d.say);
    CHECK(d.say->event == "stream_rate_limited");
    CHECK(d.say->text.find("naming a per-stream limit of 9223372036854775808 bytes/s, which cannot be the limit "
                           "(Loki restarted?); sending 50000 bytes at most") != std::string::npos);
}

TEST_CASE("policy: a 429 that names no limit halves the stream's requests each time, down to one entry",
          "[sender][policy]") {
    struct Row {
        loki::PushResponse v;
        const char* named;
    };
    const Row rows[] = {
        {nameless_429(), "naming no limit we can read"},
        {per_stream_429(10, 0), "naming its per-stream limit in a form we cannot read"},
    };
    for (const auto& row : rows) {
        INFO(row.named);
        Rig rig;
        uint64_t bytes = 40'000;
        for (int i = 0; i < 20; ++i) {
            const auto d = rig.decide(row.v, {10, bytes, bytes - 10}, kNow + i * kSecond);
            CHECK(d.action == Action::kBackoff);
            CHECK(rig.s.cap_bytes == std::max<uint64_t>(1, bytes / 2));
            if (i == 0) {
                REQUIRE(d.say);
                CHECK(d.say->text.find(row.named) != std::string::npos);
            }
            bytes = rig.policy.request_cap(rig.s, kNow + i * kSecond);
        }
        CHECK(bytes == 1);  // a single entry, never dropped for a limit nobody named
    }
}

TEST_CASE("policy: a request cap halved for a nameless 429 doubles back with each success, to batch_max_bytes",
          "[sender][policy]") {
    Rig rig;
    rig.decide(nameless_429(), {100, 64 << 10, 60 << 10});
    CHECK(rig.s.cap_bytes == 32 << 10);
    std::vector<uint64_t> caps;
    for (int i = 0; i < 6; ++i) {
        rig.decide(stored(), {1, rig.s.cap_bytes, rig.s.cap_bytes});
        caps.push_back(rig.policy.request_cap(rig.s, kNow));
    }
    CHECK(caps == std::vector<uint64_t>{64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 1 << 20});
    CHECK_FALSE(rig.s.cap_grows);
    CHECK(rig.s.cap_bytes == 0);  // back to no cap of its own

    // Under a named per-stream rate it grows back to below that rate, and stays there.
    Rig paced;
    paced.s.rate_bps = 64 << 10;
    paced.s.cap_bytes = 1'000;
    paced.s.cap_grows = true;
    for (int i = 0; i < 10; ++i) paced.decide(stored(), {1, 1'000, 1'000});
    CHECK(paced.s.cap_bytes == (64 << 10) * 3 / 4);
    CHECK_FALSE(paced.s.cap_grows);
}

TEST_CASE("policy: the tenant's 429 caps every stream's requests below its rate, said once a minute",
          "[sender][policy]") {
    Rig rig;
    auto d = rig.decide(tenant_429(256 << 10), {400, 400'000, 399'600});
    CHECK(d.action == Action::kBackoff);
    CHECK(d.tenant_rate_limit == 256 << 10);
    CHECK(rig.policy.tenant().rate == 256 << 10);
    CHECK(rig.policy.tenant().cap == 128 << 10);
    REQUIRE(d.say);
    CHECK(d.say->event == "tenant_rate_limited");
    CHECK(rig.s.attempt == 1);
    ResponsePolicy::Stream other;
    CHECK(rig.policy.request_cap(other, kNow) == 128 << 10);

    // Within the minute: not said again.
    d = rig.decide(tenant_429(256 << 10), {100, 131'072, 130'000}, kNow + 30 * kSecond);
    CHECK_FALSE(d.say);
    d = rig.decide(tenant_429(256 << 10), {100, 131'072, 130'000}, kNow + 61 * kSecond);
    CHECK(d.say);

    // A per-stream limit above the tenant's cannot be the stream's.
    d = rig.decide(per_stream_429(10, 1 << 20), {10, 10'000, 9'990}, kNow + 62 * kSecond);
    CHECK(d.action == Action::kBackoff);
    CHECK(rig.s.rate_bps == 0);
}

TEST_CASE("policy: what Loki's answers taught is probed again after the bound", "[sender][policy]") {
    Rig rig;
    rig.policy.set_reprobe_after(300 * kSecond);
    rig.decide(per_stream_429(10, 2'048), {10, 10'000, 9'990});
    rig.decide(tenant_429(256 << 10), {10, 400'000, 399'990});
    CHECK(rig.policy.request_cap(rig.s, kNow + 300 * kSecond) == 1'536);  // 3/4 of 2 KB/s, still held
    CHECK(rig.s.rate_bps == 2'048);
    CHECK(rig.policy.tenant().cap == 128 << 10);  // the tenant's too, at the bound itself
    CHECK(rig.policy.request_cap(rig.s, kNow + 301 * kSecond) == 1 << 20);
    CHECK(rig.s.rate_bps == 0);
    CHECK(rig.s.learned_ns == 0);
    CHECK(rig.policy.tenant().cap == 0);
    CHECK(rig.policy.tenant().rate == 0);
}

TEST_CASE("policy: a wait Loki's answer asks for is never longer than max_backoff, while our own pace is ours",
          "[sender][policy]") {
    const int64_t max_wait = 30 * kSecond;
    Rig rig;
    // 1 KB/s for 1 MB would be seventeen minutes.
    rig.decide(per_stream_429(10, 1'024), {10, 1'000'000, 999'990});
    CHECK(rig.s.next_try_ns == kNow + max_wait);
    // Stored while paced at it: the next waits what this took at 1 KB/s, bounded the same.
    rig.decide(stored(), {1, 512, 511}, kNow + max_wait);
    CHECK(rig.s.next_try_ns == kNow + max_wait + kSecond / 2);
    rig.decide(stored(), {1, 100'000, 99'999}, kNow + 2 * max_wait);
    CHECK(rig.s.next_try_ns == kNow + 3 * max_wait);

    // max_stream_rate is our own pace, below Loki's shard threshold: not bounded by max_backoff.
    Rig own;
    own.cfg.max_stream_rate = 1'000;
    own.decide(stored(), {100, 100'000, 99'900});
    CHECK(own.s.next_try_ns == kNow + 100 * kSecond);
    CHECK(own.policy.request_cap(own.s, kNow) == 250);  // a quarter of the pace
}

TEST_CASE("policy: a held-back stream says so at most once a minute", "[sender][policy]") {
    Rig rig;
    CHECK(rig.decide(nameless_429(), {10, 1'000, 990}).say);
    CHECK_FALSE(rig.decide(nameless_429(), {10, 500, 490}, kNow + 59 * kSecond).say);
    CHECK_FALSE(rig.decide(per_stream_429(10, 64 << 10), {10, 250, 240}, kNow + 59 * kSecond).say);
    CHECK(rig.decide(per_stream_429(10, 64 << 10), {10, 250, 240}, kNow + 60 * kSecond).say);
}

TEST_CASE("policy: 5xx, refused credentials and no answer back off exponentially, said every tenth try",
          "[sender][policy]") {
    Rig rig;
    const auto v = answer(503, loki::Verdict::kRetry, "at least 1 live replicas required");
    int64_t now = kNow;
    int said = 0;
    for (int i = 0; i < 21; ++i) {
        const int64_t before = rig.s.next_try_ns;
        const auto d = rig.decide(v, {10, 1'000, 990}, now);
        CHECK(d.action == Action::kBackoff);
        CHECK(d.retry);
        said += d.say ? 1 : 0;
        // min_backoff doubled per try, up to max_backoff; jittered within [d/2, d].
        const int64_t full = std::min<int64_t>(int64_t(500) << std::min(i, 20), 30'000) * 1'000'000;
        CHECK(rig.s.next_try_ns >= std::max(before, now + full / 2));
        CHECK(rig.s.next_try_ns <= std::max(before, now + full));
        now = rig.s.next_try_ns;
    }
    CHECK(said == 3);  // tries 0, 10 and 20
    CHECK(rig.s.attempt == 21);
    CHECK(rig.decide(stored(), {10, 1'000, 990}, now).action == Action::kStored);
    CHECK(rig.s.attempt == 0);

    struct Row {
        loki::PushResponse v;
        std::string error;
        shipper::Severity severity;
        const char* event;
        std::string text;
    };
    const Row rows[] = {
        {answer(503, loki::Verdict::kRetry, "at least 1 live replicas required"), "", shipper::Severity::kWarning,
         "push_failed",
         "Loki push failed (HTTP 503: at least 1 live replicas required); retrying, data stays in the spool"},
        {answer(0, loki::Verdict::kRetry), "Connection refused", shipper::Severity::kWarning, "push_failed",
         "Loki push failed (Connection refused); retrying, data stays in the spool"},
        {answer(401, loki::Verdict::kAuthFailure, "no org id"), "", shipper::Severity::kError, "auth_failed",
         "Loki wants a tenant: set shipper.loki.tenant (sent as X-Scope-OrgID) (HTTP 401: no org id); retrying, "
         "data stays in the spool"},
        {answer(403, loki::Verdict::kAuthFailure, "forbidden"), "", shipper::Severity::kError, "auth_failed",
         "Loki refused our credentials (HTTP 403: forbidden); retrying, data stays in the spool"},
        // A proxy's 401 for a wrong password is not Loki asking for a tenant: the advice would send
        // the operator to the wrong setting.
        {answer(401, loki::Verdict::kAuthFailure, "401 Authorization Required"), "", shipper::Severity::kError,
         "auth_failed",
         "Loki refused our credentials (HTTP 401: 401 Authorization Required); retrying, data stays in the spool"},
    };
    for (const auto& row : rows) {
        INFO(row.text);
        Rig fresh;
        const auto d = fresh.decide(row.v, {10, 1'000, 990}, kNow, row.error);
        REQUIRE(d.say);
        CHECK(d.say->severity == row.severity);
        CHECK(d.say->event == row.event);
        CHECK(d.say->text == row.text);
    }
}

TEST_CASE("policy: a named limit below a kilobyte a second is no limit: the stream is not paced at it",
          "[sender][policy]") {
    // One 429 naming "1B/sec" (a proxy's, a forged one) must not pace a healthy stream at a
    // line every half minute for the next five minutes.
    Rig rig;
    const auto d = rig.decide(per_stream_429(10, 1), {10, 10'000, 9'990});
    CHECK(d.action == Action::kBackoff);
    CHECK(d.stream_rate_limit == 0);
    CHECK(rig.s.rate_bps == 0);
    CHECK(rig.s.next_try_ns <= kNow + rig.cfg.min_backoff_ms * 1'000'000);
    rig.decide(stored(), {5, 5'000, 4'995}, kNow + kSecond);
    CHECK(rig.s.next_try_ns <= kNow + kSecond);  // not paced after the success
    Rig tenant;
    tenant.decide(tenant_429(1), {10, 10'000, 9'990});
    CHECK(tenant.policy.tenant().cap == 0);
    CHECK(tenant.policy.tenant().rate == 0);
}

TEST_CASE("policy: a lone entry within the named per-stream limit is never dropped, however often refused",
          "[sender][policy]") {
    // Loki refuses a stream whole while its bucket is empty: a small line waits, it is not lost.
    // One of exactly a second's worth of the limit fits the bucket once it has refilled.
    for (const uint64_t bytes : {uint64_t(7), uint64_t(64 << 10)}) {
        INFO(bytes);
        Rig rig;
        for (int i = 0; i < 10; ++i) {
            const auto d = rig.decide(per_stream_429(1, 64 << 10), {1, bytes, bytes - 1}, kNow + i * kSecond);
            CHECK(d.action == Action::kPaced);
            CHECK(!d.settles());
            CHECK(rejected(d).empty());
        }
    }
}

TEST_CASE("policy: the tenant's named rate is probed again after the bound, also when it capped nothing",
          "[sender][policy]") {
    Rig rig;
    rig.policy.set_reprobe_after(60 * kSecond);
    // A small push refused by the tenant's limit (shared by the whole cluster): no cap, a rate.
    rig.decide(tenant_429(1 << 20), {1, 100, 99});
    CHECK(rig.policy.tenant().cap == 0);
    CHECK(rig.policy.tenant().rate == 1 << 20);
    rig.policy.request_cap(rig.s, kNow + 61 * kSecond);
    CHECK(rig.policy.tenant().rate == 0);
    // A per-stream limit above the stale tenant rate is plausible again.
    CHECK(rig.decide(per_stream_429(10, 4 << 20), {10, 8 << 20, 8 << 20}, kNow + 62 * kSecond).stream_rate_limit ==
          4 << 20);
}

TEST_CASE("policy: when Loki stores again after an outage, a stream that failed in it goes now, not after its backoff",
          "[sender][policy]") {
    Rig rig;
    rig.cfg.max_backoff_ms = 300'000;
    ResponsePolicy::Stream self, data;
    const auto down = answer(503, loki::Verdict::kRetry, "at least 1 live replicas required");
    // Loki down a minute: the shipper's own stream failed often (its warnings keep coming), its
    // backoff grew past the data stream's.
    int64_t t = kNow;
    for (int i = 0; i < 10; ++i, t += 6 * kSecond) {
        rig.policy.decide(self, "{job=\"jobtrail-shipper\"}", {1, 100, 99}, down, "", t);
        if (i % 3 == 0) rig.policy.decide(data, kStream, {1, 100, 99}, down, "", t);
    }
    REQUIRE(self.next_try_ns > t + 30 * kSecond);
    const auto d = rig.policy.decide(data, kStream, {1, 100, 99}, stored(), "", t);
    CHECK(d.outage_since_ns == kNow);
    ResponsePolicy::recovered(self, d.outage_since_ns, t);
    CHECK(self.next_try_ns <= t);
    // Its own first success ends nothing more: the outage was said over once.
    CHECK(rig.policy.decide(self, "{job=\"jobtrail-shipper\"}", {1, 100, 99}, stored(), "", t).outage_since_ns == 0);
}

TEST_CASE("policy: a stream that fails while Loki stores the others keeps its backoff", "[sender][policy]") {
    Rig rig;
    ResponsePolicy::Stream odd, other;
    const auto err = answer(500, loki::Verdict::kRetry, "internal error");
    rig.policy.decide(odd, kStream, {1, 100, 99}, err, "", kNow);
    // Another stream stored: odd's failure may have been an outage's, it goes once more now.
    auto d = rig.policy.decide(other, "{job=\"b\"}", {1, 100, 99}, stored(), "", kNow + kSecond);
    ResponsePolicy::recovered(odd, d.outage_since_ns, kNow + kSecond);
    CHECK(odd.next_try_ns <= kNow + kSecond);
    // It fails again while Loki stores the others: not an outage, its backoff stands.
    rig.policy.decide(odd, kStream, {1, 100, 99}, err, "", kNow + 2 * kSecond);
    const int64_t due = odd.next_try_ns;
    REQUIRE(due > kNow + 2 * kSecond);
    d = rig.policy.decide(other, "{job=\"b\"}", {1, 100, 99}, stored(), "", kNow + 2 * kSecond + 1);
    ResponsePolicy::recovered(odd, d.outage_since_ns, kNow + 2 * kSecond + 1);
    CHECK(odd.next_try_ns == due);
}

TEST_CASE(
    "policy: a rate Loki names is plausible from a kilobyte to a terabyte a second and up to the tenant's "
    "with the bounds included",
    "[sender][policy]") {
    constexpr uint64_t kMin = ResponsePolicy::kMinPlausibleRate, kMax = ResponsePolicy::kMaxPlausibleRate;
    // The tenant's rate: taken at either bound, not one past them.
    for (const uint64_t limit : {kMin, kMax}) {
        Rig rig;
        INFO(limit);
        CHECK(rig.decide(tenant_429(limit), {1, 100, 99}).tenant_rate_limit == limit);
        CHECK(rig.policy.tenant().rate == limit);
    }
    for (const uint64_t limit : {kMin - 1, kMax + 1}) {
        Rig rig;
        INFO(limit);
        CHECK(rig.decide(tenant_429(limit), {1, 100, 99}).tenant_rate_limit == 0);
        CHECK(rig.policy.tenant().rate == 0);
    }
    // A stream's: up to a terabyte a second, not one byte more.
    {
        Rig rig;
        CHECK(rig.decide(per_stream_429(10, kMax), {10, 10'000, 9'990}).stream_rate_limit == kMax);
        CHECK(rig.s.rate_bps == kMax);
        Rig over;
        CHECK(over.decide(per_stream_429(10, kMax + 1), {10, 10'000, 9'990}).stream_rate_limit == 0);
        CHECK(over.s.rate_bps == 0);
    }
    // And up to the tenant's rate exactly: a stream may have the whole tenant's rate.
    {
        Rig rig;
        rig.decide(tenant_429(256 << 10), {1, 100, 99});
        CHECK(rig.decide(per_stream_429(10, 256 << 10), {10, 10'000, 9'990}, kNow + kSecond).stream_rate_limit ==
              256 << 10);
        Rig over;
        over.decide(tenant_429(256 << 10), {1, 100, 99});
        CHECK(over.decide(per_stream_429(10, (256 << 10) + 1), {10, 10'000, 9'990}, kNow + kSecond).stream_rate_limit ==
              0);
    }
}

TEST_CASE("policy: the tenant's 429 caps requests only for a push over half its rate to the byte", "[sender][policy]") {
    const uint64_t rate = 256 << 10;
    Rig half;
    half.decide(tenant_429(rate), {100, rate / 2, rate / 2 - 100});
    CHECK(half.policy.tenant().cap == 0);  // half the rate fits beside the others' pushes: not split
    ResponsePolicy::Stream other;
    CHECK(half.policy.request_cap(other, kNow) == half.cfg.batch_max_bytes);
    Rig over;
    over.decide(tenant_429(rate), {100, rate / 2 + 1, rate / 2 - 99});
    CHECK(over.policy.tenant().cap == rate / 2);
    CHECK(over.policy.request_cap(other, kNow) == rate / 2);
}

TEST_CASE("policy: a push Loki answers 400 for in part counts against the stream's pace like a stored one",
          "[sender][policy]") {
    // Loki's rate limiter took the accepted entries' bytes: the next request waits for them.
    Rig named;
    named.s.rate_bps = 64 << 10;
    auto v = answer(400, loki::Verdict::kRejected, "entry too far behind");
    v.rejected = {{"too_far_behind", 1}};
    named.decide(v, {10, 32 << 10, (32 << 10) - 10});
    CHECK(named.s.next_try_ns == kNow + kSecond / 2);
    // And our own pace below Loki's shard threshold.
    Rig own;
    own.cfg.max_stream_rate = 1'000;
    own.decide(v, {100, 100'000, 99'900});
    CHECK(own.s.next_try_ns == kNow + 100 * kSecond);
}
