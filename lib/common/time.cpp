#include "common/time.hpp"

#include <bit>
#include <charconv>
#include <cstring>
#include <ctime>

namespace jobtrail {
namespace {

int64_t clock_ns(clockid_t id) {
    timespec ts{};
    clock_gettime(id, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

template <typename T>
bool parse_uint(std::string_view s, T& out) {
    if (s.empty()) return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
}

// n decimal digits at s[pos]: a fixed-width field of a timestamp (the caller checked the length).
// Hand-rolled because the shipper parses a timestamp per NCCL line.
template <typename T>
bool fixed_digits(std::string_view s, size_t pos, size_t n, T& out) {
    T v = 0;
    for (size_t i = 0; i < n; ++i) {
        const unsigned d = static_cast<unsigned>(static_cast<unsigned char>(s[pos + i])) - '0';
        if (d > 9) return false;
        v = static_cast<T>(v * 10 + static_cast<T>(d));
    }
    out = v;
    return true;
}

// Splits "123unit" into the number and the unit.
bool split_number(std::string_view s, uint64_t& n, std::string_view& unit) {
    size_t i = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i == 0) return false;
    unit = s.substr(i);
    while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
    return parse_uint(s.substr(0, i), n);
}

}  // namespace

int64_t realtime_ns() {
    return clock_ns(CLOCK_REALTIME);
}
int64_t monotonic_ns() {
    return clock_ns(CLOCK_MONOTONIC);
}

std::string format_rfc3339_ns(int64_t ns) {
    int64_t sec = ns / 1'000'000'000;
    int64_t frac = ns % 1'000'000'000;
    if (frac < 0) {
        frac += 1'000'000'000;
        --sec;
    }
    const time_t t = static_cast<time_t>(sec);
    tm tmv{};
    gmtime_r(&t, &tmv);
    char buf[48];
    const size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tmv);
    std::string out(buf, n);
    char fbuf[16];
    snprintf(fbuf, sizeof fbuf, ".%09lldZ", static_cast<long long>(frac));
    out += fbuf;
    return out;
}

std::optional<int64_t> parse_rfc3339_ns(std::string_view s) {
    // YYYY-MM-DDTHH:MM:SS[.fffffffff](Z|+hh:mm|+hhmm|-hh:mm|-hhmm)
    if (s.size() < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':')
        return std::nullopt;
    int64_t offset_s = 0;
    if (s.back() == 'Z') {
        s.remove_suffix(1);
    } else {
        // By hand: find_last_of calls memchr over its set for every character, a tenth of the
        // shipper's instructions per NCCL line.
        size_t sign = s.size();
        while (sign > 0 && s[sign - 1] != '+' && s[sign - 1] != '-') --sign;
        if (sign-- < 20) return std::nullopt;  // none, or inside the date and time
        std::string_view z = s.substr(sign + 1);
        int oh = 0, om = 0;
        if (z.size() == 5 && z[2] == ':') {
            if (!fixed_digits(z, 0, 2, oh) || !fixed_digits(z, 3, 2, om)) return std::nullopt;
        } else if (z.size() == 4) {
            if (!fixed_digits(z, 0, 2, oh) || !fixed_digits(z, 2, 2, om)) return std::nullopt;
        } else {
            return std::nullopt;
        }
        if (oh > 23 || om > 59) return std::nullopt;
        offset_s = (s[sign] == '+' ? 1 : -1) * (int64_t{oh} * 3600 + int64_t{om} * 60);
        s = s.substr(0, sign);
    }
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0;
    if (s.size() < 19 || !fixed_digits(s, 0, 4, y) || !fixed_digits(s, 5, 2, mo) || !fixed_digits(s, 8, 2, d) ||
        !fixed_digits(s, 11, 2, h) || !fixed_digits(s, 14, 2, mi) || !fixed_digits(s, 17, 2, se))
        return std::nullopt;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) return std::nullopt;
    int64_t frac = 0;
    std::string_view rest = s.substr(19);
    if (!rest.empty()) {
        if (rest[0] != '.' || rest.size() < 2 || rest.size() > 10) return std::nullopt;
        std::string_view digits = rest.substr(1);
        if (!fixed_digits(digits, 0, digits.size(), frac)) return std::nullopt;
        for (size_t k = digits.size(); k < 9; ++k) frac *= 10;
    }
    // Days from 1970-01-01 (proleptic Gregorian; H. Hinnant's days_from_civil): no timegm(),
    // which is slow enough to matter on the shipper's per-line path.
    const int yy = y - (mo <= 2 ? 1 : 0);
    const int era = (yy >= 0 ? yy : yy - 399) / 400;
    const unsigned yoe = static_cast<unsigned>(yy - era * 400);
    const unsigned doy = (153 * static_cast<unsigned>(mo + (mo > 2 ? -3 : 9)) + 2) / 5 + static_cast<unsigned>(d) - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    const int64_t days = static_cast<int64_t>(era) * 146097 + static_cast<int64_t>(doe) - 719468;
    int64_t secs = days * 86400 + int64_t{h} * 3600 + int64_t{mi} * 60 + se - offset_s;  // local minus offset is UTC
    // Years 0000-9999 fit in seconds but not all in int64 nanoseconds (about 1677-2262): the
    // text is hostile (NCCL lines), so out of range is refused, never wrapped. Borrowing a
    // second for negative times keeps the earliest representable instant representable.
    if (secs < 0 && frac > 0) {
        ++secs;
        frac -= 1'000'000'000;
    }
    int64_t ns = 0;
    if (__builtin_mul_overflow(secs, int64_t{1'000'000'000}, &ns) || __builtin_add_overflow(ns, frac, &ns))
        return std::nullopt;
    return ns;
}

bool Rfc3339Parser::same_second(std::string_view s) const {
    // Words, not memcmp calls: the prefix in three loads, the zone (at most 8 bytes, at the
    // end of a text of more than 20) in one.
    if constexpr (std::endian::native != std::endian::little)
        return std::memcmp(s.data(), prefix_, 19) == 0 &&
               std::memcmp(s.data() + s.size() - zone_len_, &zone_word_, zone_len_) == 0;
    uint64_t a[3], b[3];
    std::memcpy(a, s.data(), 8);
    std::memcpy(a + 1, s.data() + 8, 8);
    std::memcpy(a + 2, s.data() + 11, 8);
    std::memcpy(b, prefix_, 8);
    std::memcpy(b + 1, prefix_ + 8, 8);
    std::memcpy(b + 2, prefix_ + 11, 8);
    if (((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2])) != 0) return false;
    uint64_t z = 0;
    std::memcpy(&z, s.data() + s.size() - 8, 8);
    z >>= 8 * (8 - zone_len_);  // little-endian: the last zone_len_ bytes
    return z == zone_word_;
}

std::optional<int64_t> Rfc3339Parser::parse(std::string_view s) {
    if (zone_len_ && s.size() > 20 + zone_len_ && s[19] == '.' && same_second(s)) {
        const std::string_view digits = s.substr(20, s.size() - 20 - zone_len_);
        int64_t frac = 0;
        if (digits.size() <= 9 && fixed_digits(digits, 0, digits.size(), frac)) {
            static constexpr int64_t kScale[10] = {1'000'000'000, 100'000'000, 10'000'000, 1'000'000, 100'000,
                                                   10'000,        1'000,       100,        10,        1};
            return second_ns_ + frac * kScale[digits.size()];
        }
    }
    const auto ns = parse_rfc3339_ns(s);
    zone_len_ = 0;
    if (!ns || s.size() < 21 || s[19] != '.') return ns;
    size_t end = 20;
    while (end < s.size() && s[end] >= '0' && s[end] <= '9') ++end;
    const std::string_view zone = s.substr(end);
    if (zone.empty() || zone.size() > sizeof zone_word_) return ns;
    // The second itself, from the same text without its fraction: what the fraction adds to.
    char whole[19 + sizeof zone_word_];
    std::memcpy(whole, s.data(), 19);
    std::memcpy(whole + 19, zone.data(), zone.size());
    const auto second = parse_rfc3339_ns(std::string_view(whole, 19 + zone.size()));
    // Before 1970 the full parse borrows a second; near 2262 a larger fraction would overflow.
    if (!second || *second < 0 || *second > INT64_MAX - 1'000'000'000) return ns;
    std::memcpy(prefix_, s.data(), 19);
    zone_word_ = 0;
    std::memcpy(&zone_word_, zone.data(), zone.size());
    zone_len_ = zone.size();
    second_ns_ = *second;
    return ns;
}

std::optional<int64_t> parse_duration_ms(std::string_view s) {
    uint64_t n = 0;
    std::string_view unit;
    if (!split_number(s, n, unit)) return std::nullopt;
    uint64_t mult = 0;
    if (unit == "ms")
        mult = 1;
    else if (unit == "s" || unit.empty())
        mult = 1000;
    else if (unit == "m")
        mult = 60'000;
    else if (unit == "h")
        mult = 3'600'000;
    else if (unit == "d")
        mult = 86'400'000;
    else
        return std::nullopt;
    // Every caller turns durations into nanoseconds (deadlines, "that long ago"): one whose
    // nanoseconds overflow int64 (106752d and up) is refused here, not wrapped negative there.
    if (n > static_cast<uint64_t>(kMaxDurationMs) / mult) return std::nullopt;
    return static_cast<int64_t>(n * mult);
}

std::optional<uint64_t> parse_size(std::string_view s) {
    uint64_t n = 0;
    std::string_view unit;
    if (!split_number(s, n, unit)) return std::nullopt;
    uint64_t mult = 0;
    if (unit.empty() || unit == "B")
        mult = 1;
    else if (unit == "KiB" || unit == "K")
        mult = 1ULL << 10;
    else if (unit == "MiB" || unit == "M")
        mult = 1ULL << 20;
    else if (unit == "GiB" || unit == "G")
        mult = 1ULL << 30;
    else if (unit == "KB")
        mult = 1000;
    else if (unit == "MB")
        mult = 1000ULL * 1000;
    else if (unit == "GB")
        mult = 1000ULL * 1000 * 1000;
    else
        return std::nullopt;
    if (n > UINT64_MAX / mult) return std::nullopt;
    return n * mult;
}

}  // namespace jobtrail
