#include "kmsg/reader.hpp"

#include <catch2/catch.hpp>

#include "kmsg/record.hpp"
#include "kmsgfs_mount.hpp"

using namespace jobtrail::kmsg;
using jobtrail::test::KmsgfsMount;

namespace {

std::vector<Record> read_all(Reader& rd, uint64_t* lost = nullptr) {
    std::vector<Record> out;
    for (;;) {
        auto st = rd.next();
        if (st == Reader::Status::kWouldBlock) break;
        REQUIRE(st != Reader::Status::kError);
        if (st == Reader::Status::kLost) {
            if (lost) *lost += rd.lost();
            continue;
        }
        Record r;
        ParseError e;
        REQUIRE(parse_record(rd.raw(), r, e));
        out.push_back(r);
    }
    return out;
}

}  // namespace

TEST_CASE("reads the machine's real /dev/kmsg (read-only)", "[kmsg][device]") {
    Reader rd;
    REQUIRE(rd.open("/dev/kmsg", true));
    REQUIRE(rd.seek_start());
    uint64_t lost = 0;
    const auto recs = read_all(rd, &lost);
    REQUIRE_FALSE(recs.empty());
    for (size_t i = 1; i < recs.size(); ++i) CHECK(recs[i].seq > recs[i - 1].seq);
    // Nothing new after SEEK_END (non-blocking).
    REQUIRE(rd.seek_end());
    CHECK(rd.next() == Reader::Status::kWouldBlock);
}

TEST_CASE("fixture: one record per read, seek start/end, non-blocking", "[kmsg][fixture]") {
    KmsgfsMount fs;
    fs.ctl(
        "6;first\n4;NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
        " SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n6;third\n");
    Reader rd;
    REQUIRE(rd.open(fs.kmsg(), true));
    auto recs = read_all(rd);
    REQUIRE(recs.size() == 3);
    CHECK(recs[0].message == "first");
    CHECK(recs[1].dict_value("DEVICE") == "+pci:0000:3b:00.0");
    CHECK(recs[2].seq == recs[0].seq + 2);

    fs.ctl("6;fourth\n");
    recs = read_all(rd);
    REQUIRE(recs.size() == 1);
    CHECK(recs[0].message == "fourth");

    REQUIRE(rd.seek_start());
    CHECK(read_all(rd).size() == 4);
    REQUIRE(rd.seek_end());
    CHECK(rd.next() == Reader::Status::kWouldBlock);
    fs.ctl("6;fifth\n");
    recs = read_all(rd);
    REQUIRE(recs.size() == 1);
    CHECK(recs[0].message == "fifth");
}

TEST_CASE("fixture: overrun (EPIPE) becomes an explicit loss with the right count", "[kmsg][fixture]") {
    KmsgfsMount fs;
    fs.ctl("6;r0\n6;r1\n6;r2\n");
    Reader rd;
    REQUIRE(rd.open(fs.kmsg(), true));
    REQUIRE(rd.next() == Reader::Status::kRecord);  // r0; we expect r1 next
    fs.ctl("6;r3\n6;r4\n!drop 3\n");                // r1, r2 (and r0) overwritten
    auto st = rd.next();
    REQUIRE(st == Reader::Status::kLost);
    CHECK(rd.lost() == 2);
    CHECK(rd.overrun());
    REQUIRE(rd.next() == Reader::Status::kRecord);
    Record r;
    ParseError e;
    REQUIRE(parse_record(rd.raw(), r, e));
    CHECK(r.message == "r3");
}

TEST_CASE("fixture: a resumed reader reports the gap before its first record", "[kmsg][fixture]") {
    KmsgfsMount fs;
    fs.ctl("6;a\n6;b\n6;c\n6;d\n!drop 2\n");  // seq 2 and 3 remain
    Reader rd;
    REQUIRE(rd.open(fs.kmsg(), true));
    rd.expect_seq(1);  // we had acknowledged seq 0
    REQUIRE(rd.next() == Reader::Status::kLost);
    CHECK(rd.lost() == 1);
    REQUIRE(rd.next() == Reader::Status::kRecord);
    CHECK(rd.seq() == 2);
}

TEST_CASE("fixture: the ring keeps only ring-bytes of records", "[kmsg][fixture]") {
    KmsgfsMount fs(4096);
    std::string cmds;
    for (int i = 0; i < 500; ++i) cmds += "6;line number " + std::to_string(i) + " with some padding text\n";
    fs.ctl(cmds);
    Reader rd;
    REQUIRE(rd.open(fs.kmsg(), true));
    const auto recs = read_all(rd);
    CHECK(recs.size() < 500);
    CHECK(recs.back().message.find("line number 499") == 0);
    CHECK(recs.front().seq == 500 - recs.size());
}
