#include "joblog/shipped.hpp"

#include <catch2/catch.hpp>

#include "joblog/format.hpp"

using namespace jobtrail::joblog;

TEST_CASE("a shipped job log line reads back into the phase, tag, name and text it was made of", "[joblog]") {
    const std::string l = make_shipped_line("prolog", kStatus, "10-health.sh", "status=1 result=\"exit 1\"");
    CHECK(l == "prolog status[10-health.sh] status=1 result=\"exit 1\"");
    const auto p = parse_shipped_line(l);
    CHECK(p.phase == "prolog");
    CHECK(p.tag == "status");
    CHECK(p.name == "10-health.sh");
    CHECK(p.text == "status=1 result=\"exit 1\"");
    CHECK(make_shipped_line("epilog", kEnd, "", "status=0") == "epilog end status=0");
    CHECK(make_shipped_line("", kMeta, "", "user=alice") == "meta user=alice");
    CHECK(make_shipped_line("prolog", kEnd, "", "") == "prolog end ");
}

TEST_CASE("a shipped line without a phase is its tag and text", "[joblog]") {
    // A file whose path did not tell the shipper its phase.
    const auto p = parse_shipped_line("meta user=alice");
    CHECK(p.phase.empty());
    CHECK(p.tag == "meta");
    CHECK(p.text == "user=alice");
    // Only prolog and epilog are phases, and only with a tag after them.
    CHECK(parse_shipped_line("stdout hello").phase.empty());
    CHECK(parse_shipped_line("prolog").phase.empty());
    CHECK(parse_shipped_line("prolog").tag == "prolog");
}

TEST_CASE("a line read for a known phase takes only that phase as its first word", "[joblog]") {
    const auto p = parse_shipped_line("epilog end status=0", "prolog");
    CHECK(p.phase.empty());
    CHECK(p.tag == "epilog");
    CHECK(parse_shipped_line("phase-x kmsg 6,1,2,-;x", "phase-x").tag == "kmsg");
}

TEST_CASE("a shipped tag without its closing bracket has no name", "[joblog][hostile]") {
    const auto p = parse_shipped_line("prolog status[unclosed status=1");
    CHECK(p.tag == "status");
    CHECK(p.name.empty());
    CHECK(p.text == "status=1");
    const auto e = parse_shipped_line("prolog device[] x");
    CHECK(e.tag == "device");
    CHECK(e.name.empty());
    CHECK(parse_shipped_line("").tag.empty());
}

TEST_CASE("a query for shipped lines of some tags names both phases and each tag", "[joblog]") {
    CHECK(shipped_tags_pattern({kMeta, kDevice, kEnd}) == "^(prolog|epilog) (meta|device|end)");
    CHECK(shipped_tags_pattern({kEnd}) == "^(prolog|epilog) (end)");
}
