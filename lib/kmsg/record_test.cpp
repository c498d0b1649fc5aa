#include "kmsg/record.hpp"

#include <catch2/catch.hpp>

#include "kmsg/merge.hpp"

using namespace jobtrail::kmsg;

TEST_CASE("parses a plain kernel record", "[kmsg]") {
    Record r;
    ParseError e;
    REQUIRE(parse_record("6,339,5140900,-;NET: Registered PF_INET6 protocol family\n", r, e));
    CHECK(r.facility == 0);
    CHECK(r.level == 6);
    CHECK(r.seq == 339);
    CHECK(r.usec == 5140900);
    CHECK(r.flag == '-');
    CHECK(r.message == "NET: Registered PF_INET6 protocol family");
    CHECK(r.dict.empty());
}

TEST_CASE("splits facility and level and keeps continuation lines", "[kmsg]") {
    Record r;
    ParseError e;
    // prio 30 = daemon(3) << 3 | info(6), as a userspace writer would produce.
    REQUIRE(parse_record("30,1203,123456789,-;systemd[1]: Started slurmd.service.\n", r, e));
    CHECK(r.facility == 3);
    CHECK(r.level == 6);
    REQUIRE(parse_record(
        "3,5000,99000000,-;nvidia 0000:3b:00.0: enabling device\n SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n", r, e));
    REQUIRE(r.dict.size() == 2);
    CHECK(r.dict_value("SUBSYSTEM") == "pci");
    CHECK(r.dict_value("DEVICE") == "+pci:0000:3b:00.0");
    CHECK(r.dict_value("MISSING").empty());
}

TEST_CASE("a priority past the kernel's u8 facility is refused, not wrapped to the kernel's", "[kmsg][hostile]") {
    Record r;
    ParseError e;
    REQUIRE(parse_record("2047,1,2,-;last facility\n", r, e));
    CHECK(r.facility == 255);
    CHECK(r.level == 7);
    // 2048 = facility 256: as a u8 that would be 0, the kernel.
    CHECK_FALSE(parse_record("2051,1,2,-;NVRM: Xid (PCI:0000:3b:00): 79, x\n", r, e));
    CHECK(e.what == "priority is not a number");
    CHECK_FALSE(parse_record("65539,1,2,-;x\n", r, e));
}

TEST_CASE("decodes the kernel's hex escapes (backslash x NN)", "[kmsg]") {
    Record r;
    ParseError e;
    REQUIRE(parse_record("4,7,1,-;tab\\x09here back\\x5cslash \\x1b[31mred\n", r, e));
    CHECK(r.message == "tab\there back\\slash \x1b[31mred");
    // and writes them back in /dev/kmsg syntax on one line
    const auto line = format_header_line(r);
    CHECK(line.find('\x1b') == std::string::npos);
    CHECK(line.rfind("4,7,1,-;", 0) == 0);
}

TEST_CASE("continuation values are unescaped like the message", "[kmsg]") {
    Record r;
    ParseError e;
    // The kernel writes \xNN in dictionary values as in the message (Documentation/ABI/testing/dev-kmsg).
    REQUIRE(parse_record("6,8,1,-;usb 1-1: new device\n SUBSYSTEM=usb\n DEVICE=a\\x20b\n MODEL=x\\x5cy\\x09z\n", r, e));
    CHECK(r.dict_value("SUBSYSTEM") == "usb");
    CHECK(r.dict_value("DEVICE") == "a b");
    CHECK(r.dict_value("MODEL") == "x\\y\tz");
    CHECK(r.message == "usb 1-1: new device");
}

TEST_CASE("ignores unknown extra header fields", "[kmsg]") {
    Record r;
    ParseError e;
    REQUIRE(parse_record("6,10,20,-,caller=T123,future=1;hello\n", r, e));
    CHECK(r.seq == 10);
    CHECK(r.usec == 20);
    CHECK(r.message == "hello");
}

TEST_CASE("malformed records give an error, never a crash", "[kmsg]") {
    Record r;
    ParseError e;
    CHECK_FALSE(parse_record("", r, e));
    CHECK_FALSE(parse_record("6,1,2,-no semicolon here\n", r, e));
    CHECK(e.what.find("';'") != std::string::npos);
    CHECK_FALSE(parse_record("6,1;too few fields\n", r, e));
    CHECK(e.what.find("fields") != std::string::npos);
    CHECK_FALSE(parse_record("x,1,2,-;bad prio\n", r, e));
    CHECK(e.what == "priority is not a number");
    CHECK_FALSE(parse_record("6,abc,2,-;bad seq\n", r, e));
    CHECK(e.what == "sequence number is not a number");
    CHECK_FALSE(parse_record("6,1,-5,-;negative time\n", r, e));
    CHECK_FALSE(parse_record("6,99999999999999999999999,2,-;overflow\n", r, e));
    CHECK_FALSE(parse_record("6,1,2\n,-;newline in header", r, e));
    CHECK(e.what == "no ';' between header and message");
    CHECK(e.offset == 5);  // the newline, where the header ended without its ';'
    // A record cut before its ';' and its newline (the end of a truncated ring dump).
    CHECK_FALSE(parse_record("6,1,2,-", r, e));
    CHECK(e.what == "no ';' between header and message");
}

TEST_CASE("hostile bytes survive parsing", "[kmsg]") {
    Record r;
    ParseError e;
    std::string raw = "4,1,2,-;nul";
    raw += '\0';
    raw += "inside \xff\xfe invalid utf8\n";
    REQUIRE(parse_record(raw, r, e));
    CHECK(r.message.size() == std::string("nul").size() + 1 + std::string("inside \xff\xfe invalid utf8").size());
    const auto line = format_header_line(r);
    CHECK(line.find('\0') == std::string::npos);
    CHECK(line.find("\\x00") != std::string::npos);
    CHECK(line.find("\\xff\\xfe") != std::string::npos);

    std::string big = "4,2,3,-;" + std::string(size_t{100} * 1024, 'A') + "\n";
    REQUIRE(parse_record(big, r, e));
    CHECK(r.message.size() == size_t{100} * 1024);

    // A record cut in the middle (no newline) still parses what is there.
    REQUIRE(parse_record("4,3,4,-;truncated mess", r, e));
    CHECK(r.message == "truncated mess");
    // Truncated inside the header does not.
    CHECK_FALSE(parse_record("4,3,4", r, e));
}

TEST_CASE("parse_header reads numbers without the message", "[kmsg]") {
    uint64_t seq = 0, usec = 0;
    REQUIRE(parse_header("6,4242,777,-;x\n", seq, usec));
    CHECK(seq == 4242);
    CHECK(usec == 777);
    CHECK_FALSE(parse_header("garbage", seq, usec));
}

TEST_CASE("fragments flagged c and + are merged into one record", "[kmsg]") {
    FragmentMerger m;
    std::vector<Record> out;
    Record r;
    ParseError e;
    REQUIRE(parse_record("6,10,100,c;GPU 0: ", r, e));
    m.push(r, out);
    REQUIRE(parse_record("6,11,101,+;temperature ", r, e));
    m.push(r, out);
    REQUIRE(parse_record("6,12,102,+;85C\n", r, e));
    m.push(r, out);
    CHECK(out.empty());
    CHECK(m.pending());
    REQUIRE(parse_record("6,13,103,-;next line\n", r, e));
    m.push(r, out);
    REQUIRE(out.size() == 2);
    CHECK(out[0].message == "GPU 0: temperature 85C");
    CHECK(out[0].seq == 10);
    CHECK(out[0].usec == 100);
    CHECK(out[1].message == "next line");
    // a lone fragment is flushed at the end
    REQUIRE(parse_record("6,14,104,c;dangling", r, e));
    m.push(r, out);
    m.flush(out);
    REQUIRE(out.size() == 3);
    CHECK(out[2].message == "dangling");
    // a '+' without a preceding 'c' is kept as its own record
    out.clear();
    REQUIRE(parse_record("6,15,105,+;orphan", r, e));
    m.push(r, out);
    REQUIRE(out.size() == 1);
    CHECK(out[0].message == "orphan");
}

TEST_CASE("two records begun in a row: the first is a line of its own, the second takes its continuation", "[kmsg]") {
    FragmentMerger m;
    std::vector<Record> out;
    Record r;
    ParseError e;
    for (const char* raw : {"6,20,200,c;first begun", "6,21,201,c;second begun", "6,22,202,+; and continued",
                            "6,23,203,c;third begun", "6,24,204,-;a whole line"}) {
        REQUIRE(parse_record(raw, r, e));
        m.push(r, out);
    }
    m.flush(out);
    REQUIRE(out.size() == 4);
    CHECK(out[0].message == "first begun");
    CHECK(out[0].seq == 20);
    CHECK(out[1].message == "second begun and continued");
    CHECK(out[1].seq == 21);
    CHECK(out[2].message == "third begun");
    CHECK(out[3].message == "a whole line");
}

TEST_CASE("a header field left empty is refused and not read as 0 (an empty priority would be the kernel's emerg)",
          "[kmsg]") {
    Record r;
    ParseError e;
    CHECK_FALSE(parse_record(",5,2,-;NVRM: Xid (PCI:0000:3b:00): 79, x\n", r, e));
    CHECK(e.what == "priority is not a number");
    CHECK_FALSE(parse_record("6,,2,-;no sequence\n", r, e));
    CHECK(e.what == "sequence number is not a number");
    CHECK(e.offset == 2);
    CHECK_FALSE(parse_record("6,1,,-;no timestamp\n", r, e));
    CHECK(e.what == "timestamp is not a number");
    CHECK(e.offset == 4);
    // A number with anything after it is no number either.
    CHECK_FALSE(parse_record("6,12a,2,-;x\n", r, e));
    CHECK(e.what == "sequence number is not a number");
    // Only the flags may be empty: then the record is a whole line.
    REQUIRE(parse_record("6,1,2,;x\n", r, e));
    CHECK(r.flag == '-');
}

TEST_CASE("parse_header gives the sequence and time only for a header with both numbers", "[kmsg]") {
    uint64_t seq = 0, usec = 0;
    // Without a flags field, or with fields the kernel may add after it.
    REQUIRE(parse_header("6,7,8;x\n", seq, usec));
    CHECK(seq == 7);
    CHECK(usec == 8);
    REQUIRE(parse_header("6,9,10,-,caller=T12;x\n", seq, usec));
    CHECK(seq == 9);
    CHECK(usec == 10);
    CHECK_FALSE(parse_header("6;only a priority\n", seq, usec));
    CHECK_FALSE(parse_header("6,11;no time\n", seq, usec));
    CHECK_FALSE(parse_header("6,x,12,-;sequence no number\n", seq, usec));
    CHECK_FALSE(parse_header("6,13,x,-;time no number\n", seq, usec));
    CHECK_FALSE(parse_header("6,,14,-;empty sequence\n", seq, usec));
    CHECK_FALSE(parse_header("6,15,16,-", seq, usec));  // cut before its ';'
}

TEST_CASE("only ' KEY=value' lines after the message are its dictionary", "[kmsg]") {
    Record r;
    ParseError e;
    REQUIRE(
        parse_record("6,1,2,-;usb 1-1: new device\nNOT=a continuation\n no equals sign\n =no key\n\n"
                     " SUBSYSTEM=usb\n EMPTY=\n MODEL=a=b\n DEVICE=c189:1",
                     r, e));
    CHECK(r.message == "usb 1-1: new device");
    REQUIRE(r.dict.size() == 4);
    CHECK(r.dict[0] == std::pair<std::string, std::string>("SUBSYSTEM", "usb"));
    CHECK(r.dict[1] == std::pair<std::string, std::string>("EMPTY", ""));
    CHECK(r.dict[2] == std::pair<std::string, std::string>("MODEL", "a=b"));
    // The last line without its newline still counts.
    CHECK(r.dict[3] == std::pair<std::string, std::string>("DEVICE", "c189:1"));
    // An empty message keeps its dictionary.
    REQUIRE(parse_record("6,1,2,-;\n SUBSYSTEM=pci\n", r, e));
    CHECK(r.message.empty());
    REQUIRE(r.dict.size() == 1);
    CHECK(r.dict_value("SUBSYSTEM") == "pci");
}

TEST_CASE("a message that begins with a space and holds '=' is the message and no dictionary line", "[kmsg]") {
    Record r;
    ParseError e;
    // A continued fragment: its text goes on the previous one's, space and all.
    REQUIRE(parse_record("6,22,202,+; rc=-5 SUBSYSTEM=pci\n", r, e));
    CHECK(r.message == " rc=-5 SUBSYSTEM=pci");
    CHECK(r.dict.empty());
    REQUIRE(parse_record("6,23,203,+; rc=-5\n DEVICE=+pci:0000:3b:00.0\n", r, e));
    CHECK(r.message == " rc=-5");
    REQUIRE(r.dict.size() == 1);
    CHECK(r.dict_value("DEVICE") == "+pci:0000:3b:00.0");
}

TEST_CASE("a record's header line is written as /dev/kmsg writes it and reads back the same", "[kmsg]") {
    Record r;
    ParseError e;
    REQUIRE(
        parse_record("28,7,1,c;tab\\x09here back\\x5cslash \\x1b[31mred \\x5c\\x5c twice\\x5c\n SUBSYSTEM=x\n", r, e));
    // The tab is kept as it is, a backslash and a control byte are \xNN; the dictionary is not written.
    const std::string line = format_header_line(r);
    CHECK(line == "28,7,1,c;tab\there back\\x5cslash \\x1b[31mred \\x5c\\x5c twice\\x5c");
    Record back;
    REQUIRE(parse_record(line, back, e));
    CHECK(back.message == r.message);
    CHECK(back.prio() == 28);
    CHECK(back.flag == 'c');
    CHECK(format_header_line(back) == line);
    // With its wall time as a fifth field, which a reader of the ABI ignores.
    const std::string timed = format_header_line(r, 1'000'000'000);
    CHECK(timed ==
          "28,7,1,c,time=1970-01-01T00:00:01.000000000Z;tab\there back\\x5cslash \\x1b[31mred \\x5c\\x5c "
          "twice\\x5c");
    CHECK(header_line_time(timed) == 1'000'000'000);
    REQUIRE(parse_record(timed, back, e));
    CHECK(back.message == r.message);
    CHECK(back.usec == 1);
}

TEST_CASE("a line's time is the time= field after the four of the header and none other", "[kmsg]") {
    CHECK(header_line_time("6,1,2,-,time=1970-01-01T00:00:02Z;x") == 2'000'000'000);
    CHECK(header_line_time("6,1,2,-,caller=T1,time=1970-01-01T00:00:03Z;x") == 3'000'000'000);
    // Text that is no record header, though it begins with such a field.
    CHECK_FALSE(header_line_time("time=1970-01-01T00:00:02Z;x"));
    CHECK_FALSE(header_line_time("6,1,2,time=1970-01-01T00:00:02Z;x"));
    CHECK_FALSE(header_line_time("6,1,2,-;time=1970-01-01T00:00:02Z"));
    CHECK_FALSE(header_line_time("6,1,2,-,time=1970-01-01T00:00:02Z"));  // no ';'
}
