#include "loki/response.hpp"

#include <charconv>

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

}  // namespace

PushResponse classify_push_response(long status, std::string_view body) {
    PushResponse r;
    r.status = status;
    const size_t nl = body.find('\n');
    r.first_message = std::string(body.substr(0, nl == std::string_view::npos ? body.size() : nl));
    if (r.first_message.size() > 512) r.first_message.resize(512);

    if (status >= 200 && status < 300) {
        r.verdict = Verdict::kAccepted;
        return r;
    }
    if (status <= 0 || status == 408 || status == 429 || status >= 500) {
        r.verdict = Verdict::kRetry;
    } else if (status == 401 || status == 403) {
        r.verdict = Verdict::kAuthFailure;
    } else if (status == 413) {
        r.verdict = Verdict::kSplit;
    } else {
        r.verdict = Verdict::kRejected;
    }
    // Count what the body names, one message per line.
    size_t pos = 0;
    while (pos < body.size()) {
        size_t e = body.find('\n', pos);
        if (e == std::string_view::npos) e = body.size();
        const std::string_view line = body.substr(pos, e - pos);
        pos = e + 1;
        if (line.empty()) continue;
        if (line.rfind("total ignored:", 0) == 0) {
            size_t after = 0;
            r.total_ignored = number_after(line, "total ignored: ", &after);
            r.total_entries = number_after(line.substr(after), " out of ");
            continue;
        }
        ++r.rejected[reason_of(line)];
    }
    return r;
}

}  // namespace jobtrail::loki
