#include "common/text.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace jobtrail;

namespace {

// s in a buffer of exactly its size: a read past its end is caught by AddressSanitizer (CI).
struct Exact {
    explicit Exact(std::string_view s) : bytes(s.begin(), s.end()) {}
    std::string_view view() const { return {bytes.data(), bytes.size()}; }
    std::vector<char> bytes;
};

}  // namespace

TEST_CASE("the last lead byte of each UTF-8 length is kept and bytes that lead nothing are escaped", "[common]") {
    CHECK(escape_line("\xdf\xbf") == "\xdf\xbf");             // U+07FF, lead 0xdf
    CHECK(escape_line("\xef\xbf\xbd") == "\xef\xbf\xbd");     // U+FFFD, lead 0xef
    CHECK(escape_line("\xe2\x82\xac") == "\xe2\x82\xac");     // the euro sign
    CHECK(escape_line("\xed\xbf\xbf") == "\\xed\\xbf\\xbf");  // U+DFFF, the last surrogate
    CHECK(escape_line("\xed\x9f\xbf") == "\xed\x9f\xbf");     // U+D7FF, just below them
    // A lone continuation byte, or one with three more after it, leads nothing.
    CHECK(escape_line("\x80") == "\\x80");
    CHECK(escape_line("a\x80z") == "a\\x80z");
    CHECK(escape_line("\x84\x8f\xbf\xbf") == "\\x84\\x8f\\xbf\\xbf");
    CHECK(escape_line("\xf5\x80\x80\x80") == "\\xf5\\x80\\x80\\x80");
    CHECK(escape_line("\xfc\x8f\xbf\xbf") == "\\xfc\\x8f\\xbf\\xbf");
    // Controls but TAB, and DEL, are escaped; a space and '~' are not.
    CHECK(escape_line("a\tb c~") == "a\tb c~");
    CHECK(escape_line(std::string_view("\x00\x1f\x7f", 3)) == "\\x00\\x1f\\x7f");
    CHECK(escape_line("") == "");
    std::string out = "kept ";
    append_escaped(out, "\x01");
    CHECK(out == "kept \\x01");
}

TEST_CASE("hex escapes decode with any hex digit of either case and the rest is kept as written", "[common]") {
    CHECK(unescape_hex("\\x0a\\x9f\\xA0\\xFF\\x30\\xaf\\xBf") == "\x0a\x9f\xa0\xff\x30\xaf\xbf");
    CHECK(unescape_hex("\\x4Z") == "\\x4Z");
    CHECK(unescape_hex("\\xZ4") == "\\xZ4");
    CHECK(unescape_hex("\\xg0\\x0G") == "\\xg0\\x0G");
    CHECK(unescape_hex("0x41") == "0x41");  // no backslash
    CHECK(unescape_hex("\\y41") == "\\y41");
    CHECK(unescape_hex("a\\") == "a\\");
    const Exact cut("ab\\x4");
    CHECK(unescape_hex(cut.view()) == "ab\\x4");
    const Exact last("ab\\x41");
    CHECK(unescape_hex(last.view()) == "abA");
}

TEST_CASE("a UTF-8 prefix is cut at the limit or before the character the limit splits", "[common]") {
    CHECK(utf8_prefix("abcdef", 3) == "abc");
    CHECK(utf8_prefix("abc\xe2\x82\xac", 4) == "abc");
    CHECK(utf8_prefix("abc\xe2\x82\xac", 6) == "abc\xe2\x82\xac");
    CHECK(utf8_prefix("\x80\x80\x80", 2) == "");
    const Exact whole("abc");
    CHECK(utf8_prefix(whole.view(), 3) == "abc");
    CHECK(utf8_prefix(whole.view(), 0) == "");
    // A text no longer than the limit is kept as it is, whatever byte follows it in memory (here
    // a character's continuation bytes, past the end of the view).
    const std::string_view in_buffer = std::string_view("ab\xe2\x82\xac").substr(0, 4);
    CHECK(utf8_prefix(in_buffer, 4) == in_buffer);
}

TEST_CASE("starts_with and trim", "[common]") {
    CHECK(starts_with("--tenant=a", "--tenant"));
    CHECK_FALSE(starts_with("--ten", "--tenant"));
    CHECK_FALSE(starts_with("--tenant", "--x"));
    CHECK(starts_with("x", ""));
    for (const char* ws : {" ", "\t", "\n", "\r"}) {
        INFO(int(ws[0]));
        CHECK(trim(std::string(ws) + "a b" + ws) == "a b");
        CHECK(trim(std::string(ws) + ws) == "");
    }
    CHECK(trim(" \t\r\n a\tb \r\n\t") == "a\tb");
    CHECK(trim("ab") == "ab");
    const Exact blank("  ");
    CHECK(trim(blank.view()) == "");
}

TEST_CASE("a logfmt value is quoted when it has a space a quote an equals sign a backslash or a tab", "[common]") {
    CHECK(logfmt_value("a b") == "\"a b\"");
    CHECK(logfmt_value("a=b") == "\"a=b\"");
    CHECK(logfmt_value("a\\b") == "\"a\\\\b\"");
    CHECK(logfmt_value("a\tb") == "\"a\tb\"");
    CHECK(logfmt_value("a\"b") == "\"a\\\"b\"");
    CHECK(logfmt_value("") == "\"\"");
    CHECK(logfmt_value("0000:3b:00.0") == "0000:3b:00.0");
}

TEST_CASE("a URL without credentials is kept whole", "[common]") {
    CHECK(redact_url_credentials("http://loki:3100/loki/api/v1/push") == "http://loki:3100/loki/api/v1/push");
    CHECK(redact_url_credentials("http://loki") == "http://loki");
    CHECK(redact_url_credentials("http://u:p@loki") == "http://<redacted>@loki");
    CHECK(redact_url_credentials("ops@loki") == "ops@loki");
}

TEST_CASE("a quoted label value escapes quotes backslashes and newlines only", "[common]") {
    std::string out = "job=";
    append_quoted(out, "a\"b\\c\nd\te");
    CHECK(out == "job=\"a\\\"b\\\\c\\nd\te\"");
    out.clear();
    append_quoted(out, "");
    CHECK(out == "\"\"");
}

TEST_CASE("logfmt fields: a bare word is no key and values end where the text ends", "[common][hostile]") {
    CHECK(logfmt_field("flag x=1", "flag").empty());
    CHECK(logfmt_field("flag x=1", "x") == "1");
    CHECK(logfmt_field("  a=1   b=2 ", "b") == "2");
    CHECK(logfmt_field("a=\"x\\\"y\" b=2", "a") == "x\\\"y");
    CHECK(logfmt_field("a=\"x\\\"y\" b=2", "b") == "2");
    CHECK(logfmt_field("a==1", "a") == "=1");
    for (const std::string line : {"a=1 flag", "a=1 bdf=0000:3b:00.0", "bdf=", "a=1 "}) {
        INFO(line);
        const Exact e(line);
        const auto at = line.find("bdf=");
        CHECK(logfmt_field(e.view(), "bdf") == (at == std::string::npos ? "" : line.substr(at + 4)));
        CHECK(logfmt_field(e.view(), "flag").empty());
        CHECK(logfmt_field(e.view(), "missing").empty());
    }
}

TEST_CASE("logfmt fields are read within the text's bytes and no further", "[common]") {
    // A line cut from a larger buffer (a file's read, a Loki body) ends where its view ends: an
    // exact-size heap copy makes a read past it an AddressSanitizer error.
    struct Case {
        std::string line, key, value;
    };
    for (const auto& c : {Case{"a=1 b=22", "b", "22"}, Case{"a=1 b=\"2 2\"", "b", "2 2"}, Case{"a=1 b=\"2", "b", "2"},
                          Case{"a=1 flag", "flag", ""}, Case{"a=1 b=", "b", ""}, Case{"a=1 b=2", "zz", ""},
                          Case{"a=\"x\\", "a", "x\\"}}) {
        INFO(c.line);
        const auto buf = std::make_unique<char[]>(c.line.size());
        std::memcpy(buf.get(), c.line.data(), c.line.size());
        CHECK(std::string(logfmt_field(std::string_view(buf.get(), c.line.size()), c.key)) == c.value);
    }
}
