#include "shipper/sources/dcgm/handoff.hpp"

#include <catch2/catch.hpp>
#include <deque>
#include <string>

using namespace jobtrail::shipper::dcgm_source;
using W = Happening::What;

namespace {

Happening failure(int i) {
    Happening h;
    h.what = W::kConnectFailed;
    h.error = "attempt " + std::to_string(i);
    return h;
}

}  // namespace

TEST_CASE("dcgm handoff: a pipeline that stopped polling gets the newest 64 happenings, the older ones dropped",
          "[shipper][dcgm]") {
    Handoff h(16);
    for (int i = 0; i < 64; ++i) h.push(failure(i));
    auto got = h.take_happenings();
    REQUIRE(got.size() == Handoff::kMaxHappenings);
    CHECK(got.front().error == "attempt 0");
    CHECK(got.back().error == "attempt 63");
    for (int i = 0; i < 65; ++i) h.push(failure(i));
    got = h.take_happenings();
    REQUIRE(got.size() == Handoff::kMaxHappenings);
    CHECK(got.front().error == "attempt 1");
    CHECK(got.back().error == "attempt 64");
}

TEST_CASE("dcgm handoff: of the health checks not yet taken the newest 8 are kept, other happenings with them",
          "[shipper][dcgm]") {
    Handoff h(16);
    const auto check = [](int i) {
        Happening c;
        c.what = W::kCheck;
        c.error = "check " + std::to_string(i);  // a tag for the test: which check it is
        return c;
    };
    h.push(failure(0));
    for (int i = 0; i < 8; ++i) h.push(check(i));
    auto got = h.take_happenings();
    REQUIRE(got.size() == 9);
    CHECK(got[1].error == "check 0");
    h.push(failure(0));
    for (int i = 0; i < 9; ++i) h.push(check(i));
    got = h.take_happenings();
    REQUIRE(got.size() == 9);
    CHECK(got[0].error == "attempt 0");
    CHECK(got[1].error == "check 1");
    CHECK(got[8].error == "check 8");
}

TEST_CASE("dcgm handoff: violations are queued up to its capacity, past it they are dropped and counted",
          "[shipper][dcgm]") {
    Handoff h(4);
    for (int i = 0; i < 5; ++i) {
        jobtrail::dcgm::Event e;
        e.value = i;
        h.push_violation(e);
    }
    std::deque<jobtrail::dcgm::Event> got;
    h.take_violations(got);
    REQUIRE(got.size() == 4);
    CHECK(got.back().value == 3);
    CHECK(h.dropped() == 1);
}
