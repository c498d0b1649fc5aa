#include "joblog/kernel_line.hpp"

#include <catch2/catch.hpp>

#include "joblog/format.hpp"
#include "kmsg/record.hpp"

using namespace jobtrail;
using namespace jobtrail::joblog;

TEST_CASE("a job log's kernel line gives back its record at the record's own time", "[joblog]") {
    kmsg::Record r;
    r.level = 4;
    r.seq = 42;
    r.usec = 1000;
    r.message = "NVRM: Xid (PCI:0000:3b:00): 79\ttab and \\ backslash";
    const int64_t at = 1795989142146801327;
    // As the collector writes it and a job log line holds it: escaped once more.
    std::string line;
    append_line(line, at + 3'600'000'000'000, kKmsgContext, "", kmsg::format_header_line(r, at));
    Line l;
    REQUIRE(parse_line(std::string_view(line).substr(0, line.size() - 1), l));
    CHECK(is_kernel_tag(l.tag));
    CHECK(kernel_line_time(l.text) == at);
    const auto k = decode_kernel_line(l.text, l.ts_ns);
    CHECK(k.ts_ns == at);
    REQUIRE(k.record);
    CHECK(k.record->seq == 42);
    CHECK(k.record->level == 4);
    CHECK(k.record->message == r.message);
}

TEST_CASE("a kernel line without its time is at its stamp, and one that is no record has none", "[joblog]") {
    kmsg::Record r;
    r.seq = 7;
    r.message = "no time in the header";
    const auto k = decode_kernel_line(kmsg::format_header_line(r), 500);
    CHECK(k.ts_ns == 500);
    REQUIRE(k.record);
    CHECK(k.record->message == "no time in the header");
    const auto bad = decode_kernel_line("not a record", 600);
    CHECK(bad.ts_ns == 600);
    CHECK_FALSE(bad.record);
    CHECK_FALSE(kernel_line_time("not a record"));
    CHECK_FALSE(is_kernel_tag(kKmsgDict));
    CHECK(is_kernel_tag(kKmsg));
}

TEST_CASE("a kernel message with escape-like text, a newline or bad UTF-8 reads back as the kernel printed it",
          "[joblog]") {
    // A process's name is its user's choice and the kernel prints it: "\x0a" typed as four
    // characters must not come back as a newline, nor a real newline cut the message.
    for (const std::string& message : {std::string("comm \\x0a[42] and \\x41"), std::string("a\nb"),
                                       std::string("ends in \\"), std::string("bad \xff utf8 \\x5c")}) {
        INFO(message);
        kmsg::Record r;
        r.seq = 9;
        r.message = message;
        std::string line;
        append_line(line, 1'000, kKmsg, "", kmsg::format_header_line(r, 2'000));
        Line l;
        REQUIRE(parse_line(std::string_view(line).substr(0, line.size() - 1), l));
        const auto k = decode_kernel_line(l.text, l.ts_ns);
        REQUIRE(k.record);
        CHECK(k.record->message == message);
    }
}
