#include "shipper/sources/file/sanitize.hpp"

#include <catch2/catch.hpp>
#include <string>

using jobtrail::shipper::sanitize_line;

TEST_CASE("sanitize keeps plain text, shows NUL, replaces invalid UTF-8 wherever it sits", "[shipper]") {
    const std::string plain = "[2026-11-29T21:52:22.000001+0000] gpu01:1:1 [0] NCCL INFO ok";
    CHECK(sanitize_line(plain) == plain);
    // Every length up to 40 and every position, so the sixteen- and eight-byte fast paths, the
    // overlapping tail and the byte loop all see the bad byte; 0x01 and 0x7f are plain.
    for (size_t n = 1; n <= 40; ++n) {
        for (size_t at = 0; at < n; ++at) {
            const std::string a(at, 'a'), b(n - at - 1, 'a');
            CHECK(sanitize_line(a + '\0' + b) == a + "\\x00" + b);
            CHECK(sanitize_line(a + '\xff' + b) == a + "\xef\xbf\xbd" + b);
            CHECK(sanitize_line(a + '\x80' + b) == a + "\xef\xbf\xbd" + b);
            CHECK(sanitize_line(a + "\xc3\xa9" + b) == a + "\xc3\xa9" + b);  // é stays
            CHECK(sanitize_line(a + '\x01' + b) == a + '\x01' + b);
            CHECK(sanitize_line(a + '\x7f' + b) == a + '\x7f' + b);
        }
    }
}

TEST_CASE("sanitize keeps UTF-8 of each length from its lowest lead byte and replaces a sequence cut at the end",
          "[shipper]") {
    for (const std::string ok : {"\xc2\xa9", "\xe0\xa4\x85", "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf"}) {
        INFO(ok.size());
        CHECK(sanitize_line("a" + ok + "b") == "a" + ok + "b");
        CHECK(sanitize_line(std::string(20, 'a') + ok) == std::string(20, 'a') + ok);
    }
    const std::string fffd = "\xef\xbf\xbd";
    CHECK(sanitize_line("ab\xe2\x82") == "ab" + fffd + fffd);             // 3 bytes, 2 there
    CHECK(sanitize_line("ab\xf0\x9f\x98") == "ab" + fffd + fffd + fffd);  // 4 bytes, 3 there
    CHECK(sanitize_line("ab\xc1\xbf") == "ab" + fffd + fffd);             // overlong, below 0xc2
}
