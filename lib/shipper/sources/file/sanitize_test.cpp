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
