#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/fs.hpp"
#include "common/text.hpp"
#include "common/time.hpp"
#include "temp_dir.hpp"

using namespace jobtrail;

TEST_CASE("RFC 3339 nanosecond timestamps", "[common]") {
    CHECK(format_rfc3339_ns(0) == "1970-01-01T00:00:00.000000000Z");
    CHECK(format_rfc3339_ns(1795989142146801327) == "2026-11-29T21:52:22.146801327Z");
    CHECK(parse_rfc3339_ns("2026-11-29T21:52:22.146801327Z") == 1795989142146801327);
    CHECK(parse_rfc3339_ns("2026-11-29T21:52:22Z") == 1795989142000000000);
    CHECK_FALSE(parse_rfc3339_ns("2026-11-29 21:52:22Z"));
    CHECK_FALSE(parse_rfc3339_ns("2026-13-29T21:52:22Z"));
    CHECK_FALSE(parse_rfc3339_ns("2026-11-29T21:52:22.1234567890Z"));
    // Numeric offsets name the same instant in UTC; NCCL's strftime %z has no colon.
    CHECK(parse_rfc3339_ns("2026-11-29T22:52:22.146801327+01:00") == 1795989142146801327);
    CHECK(parse_rfc3339_ns("2026-11-29T16:52:22.146801+0500") == parse_rfc3339_ns("2026-11-29T11:52:22.146801Z"));
    CHECK(parse_rfc3339_ns("2026-11-29T16:52:22-0500") == parse_rfc3339_ns("2026-11-29T21:52:22Z"));
    CHECK_FALSE(parse_rfc3339_ns("2026-11-29T21:52:22+1"));
    CHECK_FALSE(parse_rfc3339_ns("2026-11-29T21:52:22"));
}

TEST_CASE("A file's run of RFC 3339 stamps parses the same with its second remembered", "[common][hostile]") {
    const std::vector<std::string> lines = {
        "2026-11-29T21:52:22.146801+0000",  "2026-11-29T21:52:22.146802+0000",
        "2026-11-29T21:52:22.9+0000",
        "2026-11-29T21:52:22.146803+0100",                                          // same second, another zone
        "2026-11-29T21:52:22.146803+0000",  "2026-11-29T21:52:22.1468031234+0000",  // ten digits: refused
        "2026-11-29T21:52:22.14680x+0000",  "2026-11-29T21:52:22.+0000",
        "2026-11-29T21:52:22+0000",         "2026-11-29T21:52:23.000001+0000",
        "2026-11-29T21:52:23.000001Z",      "2026-11-29T21:52:23.000002Z",
        "2026-11-29T21:52:23.000002+00:00", "2262-04-11T23:47:16.854775807Z",
        "2262-04-11T23:47:16.854775808Z",   "1969-12-31T23:59:59.5Z",
        "1969-12-31T23:59:59.25Z",          "2026-11-29T21:52:23.000002+0000 trailing"};
    Rfc3339Parser parser;
    for (int round = 0; round < 2; ++round)
        for (const auto& l : lines) {
            INFO(l);
            CHECK(parser.parse(l) == parse_rfc3339_ns(l));
        }
    CHECK(parser.parse("2026-11-29T21:52:22.146801+0000") == 1795989142146801000);
    CHECK(parser.parse("2026-11-29T21:52:22.5+0000") == 1795989142500000000);
    CHECK(parser.parse("2026-11-29T22:52:22.5+0100") == 1795989142500000000);
}

TEST_CASE("RFC 3339 timestamps outside int64 nanoseconds are refused, not wrapped", "[common][hostile]") {
    // The edges of int64 nanoseconds since the epoch, both ways.
    CHECK(parse_rfc3339_ns("2262-04-11T23:47:16.854775807Z") == INT64_MAX);
    CHECK_FALSE(parse_rfc3339_ns("2262-04-11T23:47:16.854775808Z"));
    CHECK_FALSE(parse_rfc3339_ns("2262-04-11T23:47:17Z"));
    CHECK(parse_rfc3339_ns("1677-09-21T00:12:43.145224192Z") == INT64_MIN);
    CHECK_FALSE(parse_rfc3339_ns("1677-09-21T00:12:43.145224191Z"));
    CHECK(parse_rfc3339_ns("1677-09-21T00:12:44Z") == INT64_MIN + 854'775'808);
    CHECK(format_rfc3339_ns(INT64_MAX) == "2262-04-11T23:47:16.854775807Z");
    CHECK(format_rfc3339_ns(INT64_MIN) == "1677-09-21T00:12:43.145224192Z");
    CHECK(parse_rfc3339_ns("1969-12-31T23:59:59.999999999Z") == -1);
    // Whole years out of range, and the four-digit extremes.
    CHECK_FALSE(parse_rfc3339_ns("1677-01-01T00:00:00Z"));
    CHECK_FALSE(parse_rfc3339_ns("2263-01-01T00:00:00Z"));
    CHECK_FALSE(parse_rfc3339_ns("9999-12-31T23:59:60.999999999Z"));
    CHECK_FALSE(parse_rfc3339_ns("0000-01-01T00:00:00Z"));
    CHECK_FALSE(parse_rfc3339_ns("0000-02-29T00:00:00-23:59"));
    // An offset that moves an in-range local time past an edge, and one that moves it back in.
    CHECK_FALSE(parse_rfc3339_ns("2262-04-11T23:47:16.854775807-00:01"));
    CHECK(parse_rfc3339_ns("2262-04-12T00:47:16.854775807+01:00") == INT64_MAX);
    CHECK_FALSE(parse_rfc3339_ns("1677-09-21T00:12:43.145224192+0001"));
    CHECK(parse_rfc3339_ns("1677-09-20T23:12:43.145224192-0100") == INT64_MIN);
    // More fractional digits than nanoseconds have.
    CHECK_FALSE(parse_rfc3339_ns("2026-11-29T21:52:22.99999999999999999999Z"));
    CHECK_FALSE(parse_rfc3339_ns("2262-04-11T23:47:16.8547758079Z"));
}

TEST_CASE("durations and sizes", "[common]") {
    CHECK(parse_duration_ms("500ms") == 500);
    CHECK(parse_duration_ms("30s") == 30'000);
    CHECK(parse_duration_ms("30") == 30'000);
    CHECK(parse_duration_ms("2m") == 120'000);
    CHECK(parse_duration_ms("1h") == 3'600'000);
    CHECK_FALSE(parse_duration_ms("soon"));
    CHECK_FALSE(parse_duration_ms("5 parsecs"));
    // In nanoseconds (how deadlines use them) 106752 days overflow int64.
    CHECK(parse_duration_ms("106751d") == 106751LL * 86'400'000);
    CHECK_FALSE(parse_duration_ms("106752d"));
    CHECK_FALSE(parse_duration_ms("9223372036854775807ms"));
    CHECK_FALSE(parse_duration_ms("99999999999999999999s"));
    CHECK(parse_size("32MiB") == 32u << 20);
    CHECK(parse_size("1KB") == 1000u);
    CHECK(parse_size("512") == 512u);
    CHECK_FALSE(parse_size("lots"));
    CHECK_FALSE(parse_size("99999999999999999999GiB"));
}

TEST_CASE("escaping keeps valid UTF-8 and escapes the rest", "[common]") {
    CHECK(escape_line("plain") == "plain");
    CHECK(escape_line("gr\xc3\xbc\xc3\x9f") == "gr\xc3\xbc\xc3\x9f");
    CHECK(escape_line("\x01\x7f") == "\\x01\\x7f");
    CHECK(escape_line("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // UTF-16 surrogate
    CHECK(escape_line("\xc0\xaf") == "\\xc0\\xaf");           // overlong
    CHECK(unescape_hex("a\\x41\\x5cz\\xZZ") == "aA\\z\\xZZ");
    CHECK(utf8_prefix("\xe2\x82\xac\xe2\x82\xac", 4) == "\xe2\x82\xac");
    CHECK(logfmt_value("simple") == "simple");
    CHECK(logfmt_value("has space \"q\"") == "\"has space \\\"q\\\"\"");
}

TEST_CASE("overlong and out-of-range UTF-8 is escaped, the shortest forms at each length pass", "[common][hostile]") {
    // '/' (0x2f) in three and four bytes: a filter that decodes them sees a '/' the escaper let by.
    CHECK(escape_line("\xe0\x80\xaf") == "\\xe0\\x80\\xaf");
    CHECK(escape_line("\xf0\x80\x80\xaf") == "\\xf0\\x80\\x80\\xaf");
    CHECK(escape_line("\xe0\x9f\xbf") == "\\xe0\\x9f\\xbf");           // U+07FF in three bytes
    CHECK(escape_line("\xf0\x8f\xbf\xbf") == "\\xf0\\x8f\\xbf\\xbf");  // U+FFFF in four bytes
    CHECK(escape_line("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
    CHECK(escape_line("\xc1\xbf") == "\\xc1\\xbf");                    // U+007F in two bytes
    // The smallest code point of each length, and the largest of all, are valid and kept.
    CHECK(escape_line("\xc2\x80") == "\xc2\x80");                  // U+0080
    CHECK(escape_line("\xe0\xa0\x80") == "\xe0\xa0\x80");          // U+0800
    CHECK(escape_line("\xf0\x90\x80\x80") == "\xf0\x90\x80\x80");  // U+10000
    CHECK(escape_line("\xf4\x8f\xbf\xbf") == "\xf4\x8f\xbf\xbf");  // U+10FFFF
    // Cut short or with a bad continuation byte: escaped, and what follows is read on its own.
    CHECK(escape_line("\xe2\x82") == "\\xe2\\x82");
    CHECK(escape_line("\xe2(\xac") == "\\xe2(\\xac");
}

TEST_CASE("credentials in URLs are redacted, the rest is kept", "[common]") {
    CHECK(redact_url_credentials("https://ops:s3cret@loki:3100/loki") == "https://<redacted>@loki:3100/loki");
    CHECK(redact_url_credentials("http://loki:3100/a@b") == "http://loki:3100/a@b");  // '@' in the path
    CHECK(redact_url_credentials("--tenant") == "--tenant");
}

TEST_CASE("an exclusive lock is held once, names its holder, and is free again when closed", "[common]") {
    jobtrail::test::TempDir d;
    const std::string path = d.path() + "/shipper.lock";
    {
        auto first = jobtrail::lock_exclusive(path);
        REQUIRE(first.ok);
        const auto second = jobtrail::lock_exclusive(path);
        REQUIRE_FALSE(second.ok);
        CHECK(second.error == path + " is held by another process (pid " + std::to_string(::getpid()) + ")");
    }
    CHECK(jobtrail::lock_exclusive(path).ok);
    CHECK_FALSE(jobtrail::lock_exclusive(d.path() + "/none/x.lock").ok);
}

TEST_CASE("an atomic write replaces a link at its path and names its temporary file so nobody can guess it",
          "[common][hostile]") {
    jobtrail::test::TempDir d;
    const std::string secret = d.path() + "/secret", path = d.path() + "/state.json";
    REQUIRE(jobtrail::write_file_atomic(secret, "TOPSECRET\n", 0600).ok);
    REQUIRE(::symlink(secret.c_str(), path.c_str()) == 0);
    REQUIRE(jobtrail::write_file_atomic(path, "{}\n", 0644).ok);
    CHECK(jobtrail::read_small_file(secret) == "TOPSECRET\n");
    CHECK(jobtrail::read_small_file(path) == "{}\n");
    // 64 random bits after the pid: not the next of a sequence someone watching could plant.
    const std::string a = jobtrail::temp_name("x"), b = jobtrail::temp_name("x");
    const std::string pid = "x.tmp." + std::to_string(::getpid()) + ".";
    CHECK(a.size() == pid.size() + 16);
    CHECK(a.starts_with(pid));
    CHECK(a != b);
    std::string tmp;
    auto fd = jobtrail::create_temp_at(AT_FDCWD, d.path() + "/y", 0600, tmp);
    REQUIRE(fd.ok);
    CHECK(tmp.starts_with(d.path() + "/y.tmp."));
    CHECK(::access(tmp.c_str(), F_OK) == 0);
}

TEST_CASE("logfmt fields: bare, quoted, absent, and a key inside another key's value", "[common]") {
    const std::string_view t = R"(status=1 result="exit 1" note="a b=c" bdf=0000:3b:00.0)";
    CHECK(logfmt_field(t, "status") == "1");
    CHECK(logfmt_field(t, "result") == "exit 1");
    CHECK(logfmt_field(t, "bdf") == "0000:3b:00.0");
    CHECK(logfmt_field(t, "b").empty());  // only inside note's value
    CHECK(logfmt_field(t, "missing").empty());
    CHECK(logfmt_field("k=", "k").empty());
}

TEST_CASE("logfmt fields: a quoted value cut before its closing quote is read to the line's end, not past it",
          "[common][hostile]") {
    // A line read back from Loki ends where its bytes end: no NUL after it. In a buffer of exactly
    // its size, a read one byte past the end is caught by AddressSanitizer (the CI's unit tests).
    for (const std::string line : {R"(note="cut here)", R"(note="ends in a backslash\)", R"(a=1 note=")"}) {
        INFO(line);
        const std::vector<char> exact(line.begin(), line.end());
        const std::string_view text(exact.data(), exact.size());
        const std::string_view want = text.substr(text.find('"') + 1);
        CHECK(logfmt_field(text, "note") == want);
        CHECK(logfmt_field(text, "missing").empty());
    }
}

TEST_CASE("write_all says a write the system refuses, it does not try again for ever", "[common]") {
    // /dev/full refuses every write (ENOSPC), as a full disk does; a closed descriptor, EBADF.
    const int full = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
    REQUIRE(full >= 0);
    CHECK_FALSE(jobtrail::write_all(full, "a line\n"));
    ::close(full);
    CHECK_FALSE(jobtrail::write_all(full, "a line\n"));
    jobtrail::test::TempDir d;
    const int ok = ::open((d.path() + "/f").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    REQUIRE(ok >= 0);
    CHECK(jobtrail::write_all(ok, "a line\n"));
    ::close(ok);
}
