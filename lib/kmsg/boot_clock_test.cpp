#include "kmsg/boot_clock.hpp"

#include <catch2/catch.hpp>
#include <fstream>

#include "common/time.hpp"
#include "kmsgfs_mount.hpp"

using jobtrail::kmsg::BootClock;

TEST_CASE("the boot offset is derived once per boot and reused", "[kmsg]") {
    jobtrail::test::TempDir dir;
    BootClock a, b;
    REQUIRE(a.load(dir.path() + "/state"));
    REQUIRE(b.load(dir.path() + "/state"));
    CHECK(a.offset_ns() == b.offset_ns());
    CHECK(a.boot_id() == BootClock::current_boot_id());
    // The mapping is sane: "now" in kernel time maps back to about now.
    const uint64_t now_usec = static_cast<uint64_t>(jobtrail::monotonic_ns() / 1000);
    CHECK(std::llabs(a.wall_ns(now_usec) - jobtrail::realtime_ns()) < 1'000'000'000LL);
    CHECK(a.usec_at(a.wall_ns(12345)) == 12345);
}

TEST_CASE("an offset file of another boot is replaced", "[kmsg]") {
    jobtrail::test::TempDir dir;
    std::ofstream(dir.path() + "/boot-offset") << "some-other-boot 42\n";
    BootClock c;
    REQUIRE(c.load(dir.path()));
    CHECK(c.offset_ns() != 42);
    std::ifstream in(dir.path() + "/boot-offset");
    std::string id;
    in >> id;
    CHECK(id == BootClock::current_boot_id());
}

TEST_CASE("a corrupt offset file is replaced, not trusted", "[kmsg]") {
    jobtrail::test::TempDir dir;
    std::ofstream(dir.path() + "/boot-offset") << std::string(64, '\0');
    BootClock c;
    REQUIRE(c.load(dir.path()));
    CHECK(std::llabs(c.offset_ns() - (jobtrail::realtime_ns() - jobtrail::monotonic_ns())) < 1'000'000'000LL);
}

TEST_CASE("a record's huge usec saturates the wall clock instead of overflowing", "[kmsg][hostile]") {
    BootClock c;
    c.set("boot", 1'700'000'000'000'000'000);
    CHECK(c.wall_ns(1'000'000) == 1'700'000'001'000'000'000);
    CHECK(c.wall_ns(UINT64_MAX) == INT64_MAX);
    CHECK(c.wall_ns(static_cast<uint64_t>(INT64_MAX / 1000)) == INT64_MAX);  // product fits, sum does not
    CHECK(c.wall_ns(static_cast<uint64_t>(INT64_MAX / 1000) + 1) == INT64_MAX);
    c.set("boot", -5'000);
    CHECK(c.wall_ns(static_cast<uint64_t>(INT64_MAX / 1000)) == INT64_MAX / 1000 * 1000 - 5'000);
}
