#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "common/time.hpp"
#include "joblog/format.hpp"
#include "joblog/writer.hpp"
#include "temp_dir.hpp"

using namespace jobtrail;
using namespace jobtrail::joblog;

namespace {
std::string slurp(const std::string& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}
}  // namespace

TEST_CASE("lines round-trip through the documented format", "[joblog]") {
    std::string out;
    const int64_t ts = 1795989142146801327;
    append_line(out, ts, kStdout, "10-health check.sh", "GPU 0 ok\tfine");
    CHECK(out == "2026-11-29T21:52:22.146801327Z stdout[10-health_check.sh] GPU 0 ok\tfine\n");
    Line l;
    REQUIRE(parse_line(std::string_view(out).substr(0, out.size() - 1), l));
    CHECK(l.ts_ns == ts);
    CHECK(l.tag == "stdout");
    CHECK(l.name == "10-health_check.sh");
    CHECK(l.text == "GPU 0 ok\tfine");
}

TEST_CASE("control bytes and invalid UTF-8 cannot break a line", "[joblog]") {
    std::string out;
    std::string text = "a\nb\rc";
    text += '\0';
    text += "\xc3\x28 \xe2\x82\xac";  // invalid 2-byte sequence, then a valid euro sign
    append_line(out, 0, kStderr, "x", text);
    CHECK(std::count(out.begin(), out.end(), '\n') == 1);
    CHECK(out.find("a\\x0ab\\x0dc\\x00\\xc3(") != std::string::npos);
    CHECK(out.find("\xe2\x82\xac") != std::string::npos);
}

TEST_CASE("parse_line rejects what is not a job log line", "[joblog]") {
    Line l;
    CHECK_FALSE(parse_line("", l));
    CHECK_FALSE(parse_line("not a timestamp stdout x", l));
    CHECK_FALSE(parse_line("2026-11-29T21:52:22.1Z UPPER x", l));
    CHECK_FALSE(parse_line("2026-11-29T21:52:22.1Z tag[unclosed x", l));
    REQUIRE(parse_line("2026-11-29T21:52:22.1Z end", l));
    CHECK(l.tag == "end");
    CHECK(l.text.empty());
    CHECK(l.ts_ns == *parse_rfc3339_ns("2026-11-29T21:52:22.100000000Z"));
}

TEST_CASE("writer caps the file with a marker but always writes the footer", "[joblog]") {
    test::TempDir dir;
    {
        Writer w(1000, 100);
        REQUIRE(w.open(dir.path() + "/prolog", "7.log").ok);
        for (int i = 0; i < 100; ++i) w.line(0, kStdout, "s", "line " + std::to_string(i));
        w.line(0, kStdout, "s", std::string(500, 'L'));
        w.line(0, kEnd, "", "status=0", true);
        CHECK(w.lines_dropped() > 0);
    }
    const auto text = slurp(dir.path() + "/prolog/7.log");
    CHECK(text.size() < 1300);
    CHECK(text.find("log truncated: reached max_log_bytes=1000") != std::string::npos);
    CHECK(text.find(" end status=0\n") != std::string::npos);
    CHECK(text.find(std::string(500, 'L')) == std::string::npos);
}

TEST_CASE("writer truncates long lines with a marker", "[joblog]") {
    test::TempDir dir;
    {
        Writer w(1 << 20, 100);
        REQUIRE(w.open(dir.path(), "1.log").ok);
        w.line(0, kStdout, "s", std::string(1000, 'x'));
    }
    const auto text = slurp(dir.path() + "/1.log");
    CHECK(text.find("[jobtrail: line truncated, 900 bytes dropped]") != std::string::npos);
}

TEST_CASE("writer refuses symlinks and hard links", "[joblog]") {
    test::TempDir dir;
    const std::string target = dir.path() + "/target";
    std::ofstream(target) << "precious\n";
    REQUIRE(::symlink(target.c_str(), (dir.path() + "/9.log").c_str()) == 0);
    Writer w(1 << 20, 1024);
    auto st = w.open(dir.path(), "9.log");
    CHECK_FALSE(st.ok);
    REQUIRE(::link(target.c_str(), (dir.path() + "/10.log").c_str()) == 0);
    Writer w2(1 << 20, 1024);
    st = w2.open(dir.path(), "10.log");
    CHECK_FALSE(st.ok);
    CHECK(st.error.find("hard links") != std::string::npos);
    CHECK(slurp(target) == "precious\n");
}

TEST_CASE("a requeued job appends to its earlier log", "[joblog]") {
    test::TempDir dir;
    for (int run = 0; run < 2; ++run) {
        Writer w(1 << 20, 1024);
        REQUIRE(w.open(dir.path(), "5.log").ok);
        w.line(0, kMeta, "", "run=" + std::to_string(run));
    }
    const auto text = slurp(dir.path() + "/5.log");
    CHECK(text.find("run=0") != std::string::npos);
    CHECK(text.find("run=1") != std::string::npos);
    struct stat st {};
    REQUIRE(::stat((dir.path() + "/5.log").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0640);
}

TEST_CASE("every line of a log file has its own increasing time", "[joblog]") {
    test::TempDir dir;
    const int64_t t = 1795989142146801327;
    {
        Writer w(1 << 20, 1000);
        REQUIRE(w.open(dir.path() + "/epilog", "9.log").ok);
        for (int i = 0; i < 8; ++i) w.line(t, kStdout, "site.sh", "ok");
        w.line(t - 3'600'000'000'000, kJobtrail, "", "an hour back: the wall clock stepped");
        w.line(t + 1000, kEnd, "", "status=0", true);
    }
    std::istringstream in(slurp(dir.path() + "/epilog/9.log"));
    std::vector<int64_t> ts;
    for (std::string raw; std::getline(in, raw);) {
        Line l;
        REQUIRE(parse_line(raw, l));
        ts.push_back(l.ts_ns);
    }
    REQUIRE(ts.size() == 10);
    CHECK(ts[0] == t);
    for (size_t i = 1; i < ts.size(); ++i) CHECK(ts[i] > ts[i - 1]);
    CHECK(ts[9] == t + 1000);
}

TEST_CASE("a name's spaces brackets and tabs become '_' so the tag reads back whole", "[joblog]") {
    std::string out;
    append_line(out, 0, kStdout, "a [b]\tc", "text");
    CHECK(out == "1970-01-01T00:00:00.000000000Z stdout[a__b__c] text\n");
    Line l;
    REQUIRE(parse_line(std::string_view(out).substr(0, out.size() - 1), l));
    CHECK(l.tag == "stdout");
    CHECK(l.name == "a__b__c");
    CHECK(l.text == "text");
    CHECK(tag_name("x]") == "x_");
    CHECK(tag_name("[x") == "_x");
    CHECK(tag_name("\tx") == "_x");
}

TEST_CASE("a tag is a lowercase letter then lowercase letters digits and '-'", "[joblog]") {
    const std::string ts = "2026-11-29T21:52:22.1Z ";
    Line l;
    // Each end of each range.
    for (const char* tag : {"a", "z", "a09z-", "probe-err", "x-"}) {
        INFO(tag);
        const std::string line = ts + tag + " text";  // l points into it
        REQUIRE(parse_line(line, l));
        CHECK(l.tag == tag);
        CHECK(l.text == "text");
    }
    // One past each end, first or later, and no tag at all.
    for (const char* tag : {"`", "{", "A", "0", "9", "-", "_", "a`", "a{", "aA", "aZ", "a/", "a:", "a_", "a.", ""}) {
        INFO(tag);
        CHECK_FALSE(parse_line(ts + tag + " text", l));
    }
    // Empty brackets: the tag without a name.
    const std::string bare = ts + "stdout[] text";
    REQUIRE(parse_line(bare, l));
    CHECK(l.tag == "stdout");
    CHECK(l.name.empty());
    CHECK(l.text == "text");
}
