#include "loki/response.hpp"

#include <charconv>
#include <cstdint>
#include <vector>

namespace jobtrail::loki {
namespace {

bool has(std::string_view s, std::string_view what) {
    return s.find(what) != std::string_view::npos;
}

// Loki 2.x and 3.x word some reasons differently (protocols-and-peers.md A5): match by shape.
std::string reason_of(std::string_view line) {
    if (has(line, "entry too far behind")) return "too_far_behind";
    if (has(line, "entry out of order")) return "out_of_order";
    if (has(line, "timestamp too old")) return "too_old";
    if (has(line, "timestamp too new")) return "too_new";
    if (has(line, "ax entry size") && has(line, "exceeded")) return "line_too_long";  // Max/max
    if (has(line, "label names; limit")) return "label_names";
    if (has(line, "er stream rate limit exceeded")) return "per_stream_rate_limit";
    if (has(line, "ngestion rate limit exceeded")) return "rate_limited";
    if (has(line, "aximum active stream limit exceeded")) return "stream_limit";
    if (has(line, "structured metadata")) return "structured_metadata";
    if (has(line, "parse error") || has(line, "label pair is required") || has(line, "label name") ||
        has(line, "label value") || has(line, "error parsing labels"))
        return "labels";
    return "other";
}

uint64_t number_after(std::string_view s, std::string_view key, size_t* end = nullptr) {
    const size_t p = s.find(key);
    if (p == std::string_view::npos) return 0;
    const char* b = s.data() + p + key.size();
    uint64_t v = 0;
    auto [q, ec] = std::from_chars(b, s.data() + s.size(), v);
    if (end) *end = static_cast<size_t>(q - s.data());
    return ec == std::errc() ? v : 0;
}

// A byte size as Loki prints its limits ("64KB", "1.5MB", "8EB": units B to EB, 1 KB = 1024 B;
// reference §12). 0 when the text is not one: a unit we do not know is no limit named, never a
// number of bytes (8EB read as 8 paced a stream at 8 bytes a second). Saturates at UINT64_MAX.
uint64_t parse_size(std::string_view s) {
    double v = 0;
    auto [q, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || !(v >= 0)) return 0;
    std::string_view unit = s.substr(static_cast<size_t>(q - s.data()));
    if (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
    static constexpr std::string_view kPrefixes = "KMGTPE";
    double mul = 1;
    if (!unit.empty() && unit.front() != 'B') {
        const size_t power = kPrefixes.find(static_cast<char>(unit.front() == 'k' ? 'K' : unit.front()));
        if (power == std::string_view::npos) return 0;
        for (size_t i = 0; i <= power; ++i) mul *= 1024;
        unit.remove_prefix(1);
        if (!unit.empty() && unit.front() == 'i') unit.remove_prefix(1);  // KiB, MiB, ...
    }
    if (unit.empty() || unit.front() != 'B') return 0;
    unit.remove_prefix(1);
    // What follows the unit ends it: "/sec", ")", a space; a letter would make it another word.
    if (!unit.empty() && ((unit.front() >= 'A' && unit.front() <= 'Z') || (unit.front() >= 'a' && unit.front() <= 'z')))
        return 0;
    const double bytes = v * mul;
    if (bytes >= 18446744073709551615.0) return UINT64_MAX;
    return static_cast<uint64_t>(bytes);
}

// Loki 3 joins different validation errors with "; " and prefixes each "N errors like: ".
// Returns (count, text) pieces; a line without the prefix is one error.
std::vector<std::pair<uint64_t, std::string_view>> groups_of(std::string_view line) {
    static constexpr std::string_view kLike = " errors like: ";
    std::vector<std::pair<uint64_t, std::string_view>> out;
    auto prefix_at = [&](size_t p, uint64_t& n, size_t& text) {
        size_t q = p;
        while (q < line.size() && line[q] >= '0' && line[q] <= '9') ++q;
        if (q == p || line.substr(q, kLike.size()) != kLike) return false;
        std::from_chars(line.data() + p, line.data() + q, n);
        text = q + kLike.size();
        return true;
    };
    uint64_t n = 0;
    size_t text = 0;
    if (!prefix_at(0, n, text)) return {{1, line}};
    while (true) {
        // The next group starts at "; <digits> errors like: " (a label value could hold "; ").
        size_t next = text, end = line.size(), ntext = 0;
        uint64_t nn = 0;
        bool more = false;
        while ((next = line.find("; ", next)) != std::string_view::npos) {
            if (prefix_at(next + 2, nn, ntext)) {
                end = next;
                more = true;
                break;
            }
            next += 2;
        }
        out.emplace_back(n, line.substr(text, end - text));
        if (!more) break;
        n = nn;
        text = ntext;
    }
    return out;
}

}  // namespace

PushResponse classify_push_response(long status, std::string_view body) {
    PushResponse r;
    r.status = status;
    const size_t nl = body.find('\n');
    r.first_message = std::string(body.substr(0, nl == std::string_view::npos ? body.size() : nl));
    if (r.first_message.size() > 512) r.first_message.resize(512);

    // 260: Loki's default status while ingestion is blocked (block_ingestion_until): nothing stored.
    if (status >= 200 && status < 300 && status != 260) {
        r.verdict = Verdict::kAccepted;
        return r;
    }
    // A redirect (a proxy sending http to https), 404 or 405 (a push URL that is not Loki's push
    // path) stored nothing either: keep the data, and the warnings name the status.
    if (status <= 0 || (status >= 200 && status < 400) || status == 404 || status == 405 || status == 408 ||
        status == 429 || status >= 500) {
        r.verdict = Verdict::kRetry;
    } else if (status == 401 || status == 403 || status == 407) {
        r.verdict = Verdict::kAuthFailure;
    } else if (status == 413) {
        r.verdict = Verdict::kSplit;
    } else {
        r.verdict = Verdict::kRejected;
    }
    // One message per line. Ingester errors ("entry with timestamp ... ignored") are listed per
    // entry, in 3.x at most 10 per stream, then a trailer with the stream's true count.
    uint64_t listed = 0;
    std::string last_reason = "other";
    size_t pos = 0;
    while (pos < body.size()) {
        size_t e = body.find('\n', pos);
        if (e == std::string_view::npos) e = body.size();
        const std::string_view line = body.substr(pos, e - pos);
        pos = e + 1;
        if (line.empty()) continue;
        if (has(line, "total ignored: ") && (line.rfind("total ignored:", 0) == 0 || line.rfind("user '", 0) == 0)) {
            size_t after = 0;
            const uint64_t n = number_after(line, "total ignored: ", &after);
            r.total_ignored += n;
            r.total_entries += number_after(line.substr(after), " out of ");
            if (n > listed) r.rejected[last_reason] += n - listed;  // those past the 10 listed
            listed = 0;
            continue;
        }
        if (line.rfind("entry with timestamp ", 0) == 0 && has(line, " ignored, reason: ")) {
            last_reason = reason_of(line);
            ++r.rejected[last_reason];
            ++listed;
            if (last_reason == "per_stream_rate_limit") {
                const size_t p = line.find("(limit: ");
                if (p != std::string_view::npos) r.stream_rate_limit = parse_size(line.substr(p + 8));
            }
            continue;
        }
        for (const auto& [n, text] : groups_of(line)) {
            const std::string reason = reason_of(text);
            if (reason == "rate_limited") {
                // The tenant's limit: the whole push, '<lines>' lines totaling '<bytes>' bytes.
                r.tenant_rate_limit = number_after(text, "(limit: ");
                size_t after = 0;
                const uint64_t lines = number_after(text, "ingest '", &after);
                r.rate_limited_bytes = number_after(text.substr(after), "totaling '");
                r.rejected[reason] += lines ? lines : 1;
                continue;
            }
            r.rejected[reason] += n;
            if (reason == "line_too_long") {
                r.rejected_known_bytes += n * number_after(text, "with length '");
                r.rejected_known_entries += n;
            }
        }
    }
    return r;
}

}  // namespace jobtrail::loki
