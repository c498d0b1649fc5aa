#include "forensics/bundle/bounded_lines.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "temp_dir.hpp"

using jobtrail::forensics::bundle::BoundedLines;

namespace {

// Every line BoundedLines gives for a file holding `text`, read with these bounds.
std::vector<std::string> lines_of(const std::string& text, uint64_t max, size_t max_line, bool* cut = nullptr,
                                  uint64_t* consumed = nullptr) {
    jobtrail::test::TempDir dir;
    const std::string path = dir.path() + "/nccl.log";
    std::ofstream(path, std::ios::binary) << text;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    BoundedLines in(fd, max, max_line);
    std::vector<std::string> out;
    for (std::string l; in.next(l);) out.push_back(l);
    if (cut) *cut = in.cut();
    if (consumed) *consumed = in.consumed();
    ::close(fd);
    return out;
}

}  // namespace

TEST_CASE("a user's file comes back line by line: an endless line in pieces, every byte once, none past the bound",
          "[forensics]") {
    SECTION("a line longer than max_line is cut into pieces of max_line, then the next line is whole") {
        // A sparse file of zeros is one "line" as long as the file: it must not be held whole.
        const std::string lng(100'000 + 7, 'z');
        bool cut = true;
        uint64_t consumed = 0;
        const auto v = lines_of("first\n" + lng + "\nlast line\n", 1 << 20, 40'000, &cut, &consumed);
        REQUIRE(v.size() == 5);
        CHECK(v[0] == "first");
        CHECK(v[1] == std::string(40'000, 'z'));
        CHECK(v[2] == std::string(40'000, 'z'));
        CHECK(v[3] == std::string(20'007, 'z'));
        CHECK(v[4] == "last line");
        CHECK_FALSE(cut);
        CHECK(consumed == 6 + lng.size() + 1 + 10);
    }
    SECTION("a line of exactly max_line is one line") {
        const auto v = lines_of(std::string(300, 'a') + "\nb\n", 1 << 20, 300);
        REQUIRE(v.size() == 2);
        CHECK(v[0] == std::string(300, 'a'));
        CHECK(v[1] == "b");
        // Its newline read only with the next chunk (the reads are of 64 KiB): still one line.
        const auto w = lines_of(std::string(65536, 'a') + "\nb\n", 1 << 20, 65536);
        REQUIRE(w.size() == 2);
        CHECK(w[0] == std::string(65536, 'a'));
        CHECK(w[1] == "b");
    }
    SECTION("the last line without its newline is given as it is") {
        CHECK(lines_of("a\nb", 1 << 20, 100) == std::vector<std::string>{"a", "b"});
    }
    SECTION("a file past the bound stops at the bound and says it was cut") {
        bool cut = false;
        uint64_t consumed = 0;
        const auto v = lines_of("0123456789\nabcdefghij\nmore after the bound\n", 16, 100, &cut, &consumed);
        CHECK(v == std::vector<std::string>{"0123456789", "abcde"});
        CHECK(cut);
        CHECK(consumed == 16);
    }
    SECTION("a file exactly at the bound is not cut") {
        bool cut = true;
        const auto v = lines_of("0123456789\nabcd\n", 16, 100, &cut);
        CHECK(v == std::vector<std::string>{"0123456789", "abcd"});
        CHECK_FALSE(cut);
    }
}
