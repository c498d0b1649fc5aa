#include "shipper/sources/kmsg_source.hpp"

#include <catch2/catch.hpp>

#include "kmsgfs_mount.hpp"

using namespace jobtrail::shipper;

namespace {
std::vector<Event> drain(KmsgSource& s, nlohmann::json& saved) {
    std::vector<Event> out;
    while (s.poll(out, 1 << 20)) {
    }
    saved = s.checkpoint();
    return out;
}
}  // namespace

TEST_CASE("kmsg: resume after a restart on the same boot, same timestamps, Xid metadata", "[shipper][fixture]") {
    jobtrail::test::KmsgfsMount fs;
    jobtrail::test::TempDir state;
    jobtrail::kmsg::BootClock clock;
    std::string err;
    REQUIRE(clock.load(state.path(), err));
    Metrics m;
    nlohmann::json saved;
    fs.ctl("6;first\n4;NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n");
    std::vector<Event> a;
    {
        KmsgSource s(fs.kmsg(), clock, {"c", "n"}, m);
        s.restore(saved);
        a = drain(s, saved);
    }
    REQUIRE(a.size() == 2);
    CHECK(a[1].labels.at("priority") == "warning");
    bool xid = false;
    for (auto& [k, v] : a[1].metadata) xid |= k == "xid" && v == "79";
    CHECK(xid);
    fs.ctl("6;third\n");
    KmsgSource s2(fs.kmsg(), clock, {"c", "n"}, m);
    s2.restore(saved);
    auto b = drain(s2, saved);
    REQUIRE(b.size() == 1);  // nothing twice
    CHECK(b[0].line == "third");
}

TEST_CASE("kmsg: records overwritten while the shipper was away become one loss line", "[shipper][fixture]") {
    jobtrail::test::KmsgfsMount fs;
    jobtrail::test::TempDir state;
    jobtrail::kmsg::BootClock clock;
    std::string err;
    REQUIRE(clock.load(state.path(), err));
    Metrics m;
    nlohmann::json saved;
    fs.ctl("6;a\n");
    {
        KmsgSource s(fs.kmsg(), clock, {"c", "n"}, m);
        s.restore(saved);
        drain(s, saved);
    }
    fs.ctl("6;b\n6;c\n6;d\n!drop 3\n");  // a, b, c gone; d stays
    KmsgSource s(fs.kmsg(), clock, {"c", "n"}, m);
    s.restore(saved);
    auto e = drain(s, saved);
    REQUIRE(e.size() == 2);
    CHECK(e[0].line == "jobtrail: 2 kernel records lost (sequence gap)");
    CHECK(e[1].line == "d");
}
