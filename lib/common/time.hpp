#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace jobtrail {

int64_t realtime_ns();
int64_t monotonic_ns();

// 2026-11-29T21:42:10.123456789Z (always nine fractional digits, UTC).
std::string format_rfc3339_ns(int64_t ns);
// Accepts the form above, fewer fractional digits, and a numeric offset (+01:00, -0500: the
// instant is converted to UTC); returns nullopt on anything else.
std::optional<int64_t> parse_rfc3339_ns(std::string_view s);

// parse_rfc3339_ns for one file's lines, whose stamps mostly share their second and zone: the
// date, time and zone are parsed once a second, only the fraction on every line (the full
// parse was a tenth of the shipper's instructions per NCCL line). Same answers, always.
class Rfc3339Parser {
public:
    std::optional<int64_t> parse(std::string_view s);

private:
    bool same_second(std::string_view s) const;
    char prefix_[19] = {};    // YYYY-MM-DDTHH:MM:SS of the last stamp with a fraction
    uint64_t zone_word_ = 0;  // what followed its fraction (Z, +hh:mm, -hhmm), as bytes of a word
    size_t zone_len_ = 0;     // 0: nothing remembered
    int64_t second_ns_ = 0;
};

// The longest duration whose nanoseconds fit in int64 (about 106751 days).
inline constexpr int64_t kMaxDurationMs = INT64_MAX / 1'000'000;
// "30s", "500ms", "2m", "1h", "1d" -> milliseconds; nullopt if malformed or past kMaxDurationMs.
std::optional<int64_t> parse_duration_ms(std::string_view s);
// "64MiB", "1KiB", "512", "2GB" -> bytes; nullopt if malformed.
std::optional<uint64_t> parse_size(std::string_view s);

}  // namespace jobtrail
