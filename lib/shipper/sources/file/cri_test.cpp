#include "shipper/sources/file/cri.hpp"

#include <catch2/catch.hpp>
#include <string>

using namespace jobtrail::shipper;

TEST_CASE("CRI lines: time, stream, P or F and the message are read, tags after P/F allowed", "[cri]") {
    const auto l = cri::parse("2026-11-29T21:52:22.146801327Z stderr P:x half a line ");
    REQUIRE(l);
    CHECK(l->ts_ns == 1795989142146801327);
    CHECK(l->stream == "stderr");
    CHECK(l->partial);
    CHECK(l->message == "half a line ");  // its spaces are the program's
    const auto empty = cri::parse("2026-11-29T21:52:22Z stdout F ");
    REQUIRE(empty);
    CHECK_FALSE(empty->partial);
    CHECK(empty->message.empty());
    const auto bare = cri::parse("2026-11-29T21:52:22Z stdout F");  // no space before an empty message
    REQUIRE(bare);
    CHECK(bare->message.empty());
}

TEST_CASE("CRI lines that are not CRI are refused: time, stream and tag each checked", "[cri]") {
    for (const char* bad : {"", "plain text from a program", "2026-11-29T21:52:22Z stdout X message",
                            "2026-11-29T21:52:22Z stdin F message", "yesterday stdout F message",
                            "2026-11-29T21:52:22Z stdout", "2026-11-29T21:52:22Z  F message",
                            "2026-11-29T21:52:22Z stdout PF message", "2026-13-29T21:52:22Z stdout F message"})
        CHECK_FALSE(cri::parse(bad));
}

namespace {

cri::Line piece(std::string_view stream, bool partial, std::string_view msg, int64_t ts = 1) {
    return {ts, stream, partial, msg};
}

}  // namespace

TEST_CASE("CRI joiner: P pieces join their F per stream, with stderr written between them", "[cri]") {
    cri::Joiner j(1024);
    std::vector<cri::Joiner::Joined> out;
    j.feed(piece("stdout", true, "first ", 1), 0, out);
    j.feed(piece("stderr", false, "an error", 2), 30, out);
    CHECK(j.resume_offset(60) == 0);  // the held piece is read again after a restart
    j.feed(piece("stdout", true, "second ", 3), 60, out);
    j.feed(piece("stdout", false, "third", 4), 90, out);
    REQUIRE(out.size() == 2);
    CHECK(out[0].text == "an error");
    CHECK(out[0].stream == "stderr");
    CHECK(out[1].text == "first second third");
    CHECK(out[1].stream == "stdout");
    CHECK(out[1].ts_ns == 4);  // when the line was complete
    CHECK_FALSE(out[1].cut);
    CHECK_FALSE(j.holding());
    CHECK(j.resume_offset(120) == 120);
}

TEST_CASE("CRI joiner: a line that never ends is cut at the bound, counted, and none of it lost", "[cri]") {
    cri::Joiner j(100);
    std::vector<cri::Joiner::Joined> out;
    std::string all;
    for (int i = 0; i < 1000; ++i) {
        const std::string p(30, static_cast<char>('a' + i % 26));
        all += p;
        j.feed(piece("stdout", true, p), static_cast<uint64_t>(i) * 60, out);
        CHECK(j.held_bytes() <= 100);
    }
    j.feed(piece("stdout", false, "end"), 60'000, out);
    all += "end";
    std::string joined;
    size_t cut = 0;
    for (const auto& l : out) {
        CHECK(l.text.size() <= 100);
        joined += l.text;
        cut += l.cut;
    }
    CHECK(joined == all);
    CHECK(cut == out.size() - 1);  // every piece but the one its F ended
}

TEST_CASE("CRI joiner: after a restart from a held piece, lines already handed out are skipped", "[cri]") {
    cri::Joiner before(1024);
    std::vector<cri::Joiner::Joined> out;
    before.feed(piece("stdout", true, "start "), 0, out);
    before.feed(piece("stderr", false, "shipped"), 40, out);  // handed out before the crash
    REQUIRE(out.size() == 1);
    const uint64_t done = 80;
    const auto held = before.held_starts();
    CHECK(held[0] == 0);
    CHECK(held[1] == -1);
    // The checkpoint says: read again from resume_offset, skipping what was handed out.
    cri::Joiner after(1024);
    after.replay(done, held);
    out.clear();
    const auto p1 = piece("stdout", true, "start "), p2 = piece("stderr", false, "shipped");
    CHECK_FALSE(after.replayed(&p1, 0));
    after.feed(p1, 0, out);
    CHECK(after.replayed(&p2, 40));
    CHECK(after.replayed(nullptr, 60));  // a line that was not CRI, shipped then
    const auto p3 = piece("stdout", false, "end");
    CHECK_FALSE(after.replayed(&p3, 80));
    after.feed(p3, 80, out);
    REQUIRE(out.size() == 1);
    CHECK(out[0].text == "start end");
}

TEST_CASE("CRI joiner: pieces that come to exactly the bound are one line and one byte more is cut", "[cri]") {
    cri::Joiner j(10);
    std::vector<cri::Joiner::Joined> out;
    j.feed(piece("stdout", true, "12345", 1), 0, out);
    j.feed(piece("stdout", false, "67890", 2), 30, out);
    REQUIRE(out.size() == 1);
    CHECK(out[0].text == "1234567890");
    CHECK_FALSE(out[0].cut);
    out.clear();
    j.feed(piece("stdout", true, "12345", 3), 60, out);
    j.feed(piece("stdout", false, "678901", 4), 90, out);
    REQUIRE(out.size() == 2);
    CHECK(out[0].text == "12345");
    CHECK(out[0].cut);
    CHECK(out[1].text == "678901");
    CHECK_FALSE(out[1].cut);
}
