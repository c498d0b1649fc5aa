#include "common/time.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

using namespace jobtrail;

namespace {

constexpr int64_t kSec = 1'000'000'000;

// s in a buffer of exactly its size: a read past its end is caught by AddressSanitizer (CI).
struct Exact {
    explicit Exact(std::string_view s) : bytes(s.begin(), s.end()) {}
    std::string_view view() const { return {bytes.data(), bytes.size()}; }
    std::vector<char> bytes;
};

}  // namespace

TEST_CASE("the clocks read the system's time", "[common]") {
    // Any machine this runs on is past 2020-01-01, and has been up for some time.
    CHECK(realtime_ns() > int64_t{1'577'836'800} * kSec);
    const int64_t a = monotonic_ns();
    CHECK(a > 0);
    CHECK(monotonic_ns() >= a);
}

TEST_CASE("an RFC 3339 stamp with any one separator wrong is refused", "[common]") {
    const std::string good = "2026-11-29T21:52:22Z";
    REQUIRE(parse_rfc3339_ns(good) == int64_t{1'795'989'142} * kSec);
    for (const size_t at : {4, 7, 10, 13, 16}) {
        std::string bad = good;
        bad[at] = '/';
        INFO(bad);
        CHECK_FALSE(parse_rfc3339_ns(bad));
    }
}

TEST_CASE("an RFC 3339 stamp with a letter in any digit of its date or time is refused", "[common]") {
    const std::string good = "2026-11-29T21:52:22.5Z";
    for (size_t at = 0; at < good.size() - 1; ++at) {
        if (good[at] < '0' || good[at] > '9') continue;
        std::string bad = good;
        bad[at] = 'x';
        INFO(bad);
        CHECK_FALSE(parse_rfc3339_ns(bad));
    }
    // In the fraction, which no range check would catch.
    CHECK_FALSE(parse_rfc3339_ns("2026-11-29T21:52:22.5xZ"));
    CHECK_FALSE(parse_rfc3339_ns("2026-11-29T21:52:22.x5Z"));
}

TEST_CASE("RFC 3339 fields at their first and last values are read and one past them refused", "[common]") {
    CHECK(parse_rfc3339_ns("2026-01-01T00:00:00Z") == int64_t{1'767'225'600} * kSec);
    CHECK(parse_rfc3339_ns("2026-12-31T23:59:59Z") == int64_t{1'798'761'599} * kSec);
    // February, and the day after a leap day; a leap second is the next minute's first.
    CHECK(parse_rfc3339_ns("2024-02-29T12:00:00Z") == int64_t{1'709'208'000} * kSec);
    CHECK(parse_rfc3339_ns("2024-03-01T00:00:00Z") == int64_t{1'709'251'200} * kSec);
    CHECK(parse_rfc3339_ns("2016-12-31T23:59:60Z") == int64_t{1'483'228'800} * kSec);
    for (const char* bad :
         {"2026-00-29T21:52:22Z", "2026-13-29T21:52:22Z", "2026-11-00T21:52:22Z", "2026-11-32T21:52:22Z",
          "2026-11-29T24:52:22Z", "2026-11-29T21:60:22Z", "2026-11-29T21:52:61Z"}) {
        INFO(bad);
        CHECK_FALSE(parse_rfc3339_ns(bad));
    }
}

TEST_CASE("RFC 3339 fractions of one to nine digits are read and a bare dot is refused", "[common]") {
    const int64_t second = int64_t{1'795'989'142} * kSec;
    CHECK(parse_rfc3339_ns("2026-11-29T21:52:22.5Z") == second + 500'000'000);
    CHECK(parse_rfc3339_ns("2026-11-29T21:52:22.000000001Z") == second + 1);
    CHECK_FALSE(parse_rfc3339_ns("2026-11-29T21:52:22.Z"));
    CHECK_FALSE(parse_rfc3339_ns("2026-11-29T21:52:22x5Z"));
}

TEST_CASE("RFC 3339 offsets up to 23:59 are read both ways and malformed ones refused", "[common]") {
    const auto utc = parse_rfc3339_ns("2026-11-29T21:52:22Z");
    REQUIRE(utc);
    const int64_t most = (23 * 3600 + 59 * 60) * kSec;
    CHECK(parse_rfc3339_ns("2026-11-29T21:52:22+23:59") == *utc - most);
    CHECK(parse_rfc3339_ns("2026-11-29T21:52:22-2359") == *utc + most);
    CHECK(parse_rfc3339_ns("2026-11-29T21:52:22+00:00") == *utc);
    for (const char* bad : {"+24:00", "+00:60", "+2400", "+0060", "+01:000", "+0x:00", "+01:0x", "+0x00", "+010x",
                            "+01-00", "+1:00", "+"}) {
        const std::string s = std::string("2026-11-29T21:52:22") + bad;
        INFO(s);
        CHECK_FALSE(parse_rfc3339_ns(s));
    }
}

TEST_CASE("text shorter than an RFC 3339 stamp is refused without reading past it", "[common][hostile]") {
    for (const char* s : {"", "2026", "2026-11-29T21", "2026-11-29T21:52:2", "2026-11-29T21:52:2Z"}) {
        INFO(s);
        const Exact e(s);
        CHECK_FALSE(parse_rfc3339_ns(e.view()));
        Rfc3339Parser p;
        CHECK_FALSE(p.parse(e.view()));
    }
}

TEST_CASE("a file's stamps parse to their own instants as the second the zone or the date changes",
          "[common][hostile]") {
    // Each line differs from the one before in one part the parser remembers: the fraction, each
    // of the date's and time's fields, the zone (same length, other length), or its form.
    const std::vector<std::string> lines = {"2026-11-29T21:52:22.5+0000",   "2026-11-29T21:52:23.5+0000",
                                            "2026-11-29T21:52:22.6+0000",   "2027-11-29T21:52:22.6+0000",
                                            "2027-11-30T21:52:22.6+0000",   "2027-11-30T22:52:22.6+0000",
                                            "2027-11-30T22:52:22.6+0100",   "2027-11-30T22:52:22.7+0000",
                                            "2027-11-30T22:52:22.7-0100",   "2027-11-30T22:52:22.8-0100",
                                            "2027-11-30T22:52:22Z",         "2027-11-30T22:52:22.8-0100",
                                            "2027-11-30T22:52:22x123-0100", "2027-11-30T22:52:22.8-0100",
                                            "2027-11-30T22:52:22.-0100",    "2027-11-30T22:52:22.8-0100",
                                            "2027-11-30T22:52:22.8x-0100",  "2027-11-30T22:52:22.8-0100",
                                            "2027-11-30T22:52:22.9-01:00",  "2027-11-30T22:52:22.999999999-01:00",
                                            "2027-11-30T22:52:24.1Z",       "2027-11-30T22:52:25.1Z",
                                            "2027-11-30T22:52:25.2Z",       "2027-11-30T22:52:24.2Z"};
    Rfc3339Parser parser;
    for (const auto& l : lines) {
        INFO(l);
        CHECK(parser.parse(l) == parse_rfc3339_ns(l));
    }
    // The answers themselves, not only their agreement; a refused line comes right after one
    // whose second and zone it shares.
    Rfc3339Parser p;
    const int64_t s22 = int64_t{1'795'989'142} * kSec, h = 3600 * kSec;
    CHECK(p.parse("2026-11-29T21:52:22.5+0000") == s22 + 500'000'000);
    CHECK(p.parse("2026-11-29T21:52:23.5+0000") == s22 + kSec + 500'000'000);
    CHECK(p.parse("2026-11-29T21:52:22.25+0000") == s22 + 250'000'000);
    CHECK(p.parse("2026-11-29T22:52:22.25+0100") == s22 + 250'000'000);
    CHECK(p.parse("2026-11-29T22:52:22.75+0000") == s22 + h + 750'000'000);
    CHECK(p.parse("2026-11-29T22:52:22.5+0000") == s22 + h + 500'000'000);
    CHECK(p.parse("2026-11-29T22:52:22Z") == s22 + h);
    CHECK(p.parse("2026-11-29T22:52:22.75+0000") == s22 + h + 750'000'000);
    CHECK_FALSE(p.parse("2026-11-29T22:52:22.+0000"));
    CHECK(p.parse("2026-11-29T22:52:22.75+0000") == s22 + h + 750'000'000);
    CHECK_FALSE(p.parse("2026-11-29T22:52:22x75+0000"));
    CHECK(p.parse("2026-11-29T22:52:22.75+0000") == s22 + h + 750'000'000);
    CHECK_FALSE(p.parse("2026-11-29T22:52:22.7x+0000"));
    CHECK(p.parse("2026-11-29T22:52:22.75+0000") == s22 + h + 750'000'000);
    CHECK(p.parse("2026-11-29T22:52:23Z") == s22 + h + kSec);
}

TEST_CASE("durations in each unit and up to the largest that fits in nanoseconds", "[common]") {
    CHECK(parse_duration_ms("90s") == 90'000);
    CHECK(parse_duration_ms("9ms") == 9);
    CHECK(parse_duration_ms("0ms") == 0);
    CHECK(parse_duration_ms("1d") == 86'400'000);
    CHECK(parse_duration_ms("5 s") == 5'000);
    CHECK(parse_duration_ms("9223372036854ms") == 9'223'372'036'854);
    CHECK_FALSE(parse_duration_ms("9223372036855ms"));
    CHECK_FALSE(parse_duration_ms(""));
    CHECK_FALSE(parse_duration_ms("s"));
    CHECK_FALSE(parse_duration_ms("1w"));
    CHECK_FALSE(parse_duration_ms("-1s"));
    const Exact e("30");
    CHECK(parse_duration_ms(e.view()) == 30'000);
}

TEST_CASE("sizes in each unit and up to the largest byte count", "[common]") {
    CHECK(parse_size("7B") == 7u);
    CHECK(parse_size("3K") == 3u << 10);
    CHECK(parse_size("3KiB") == 3u << 10);
    CHECK(parse_size("3M") == 3u << 20);
    CHECK(parse_size("3MiB") == 3u << 20);
    CHECK(parse_size("3G") == uint64_t{3} << 30);
    CHECK(parse_size("3GiB") == uint64_t{3} << 30);
    CHECK(parse_size("3KB") == 3'000u);
    CHECK(parse_size("3MB") == 3'000'000u);
    CHECK(parse_size("3GB") == 3'000'000'000u);
    CHECK(parse_size("64 MiB") == 64u << 20);
    CHECK(parse_size("90") == 90u);
    CHECK_FALSE(parse_size("3TB"));
    CHECK_FALSE(parse_size("3kb"));
    CHECK(parse_size("18446744073709551615") == UINT64_MAX);
    CHECK(parse_size("17179869183GiB") == uint64_t{17179869183} << 30);
    CHECK_FALSE(parse_size("17179869184GiB"));
}
