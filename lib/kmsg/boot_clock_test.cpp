#include "kmsg/boot_clock.hpp"

#include <time.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "common/time.hpp"
#include "temp_dir.hpp"

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

TEST_CASE("the derived offset is the machine's boot time, the kernel's own", "[kmsg]") {
    // /proc/stat's btime: the kernel's wall-clock second of boot (from CLOCK_BOOTTIME, which also
    // counts suspended time; the kernel log's clock does not, so that much more is allowed).
    std::ifstream stat("/proc/stat");
    std::string key;
    int64_t btime = 0;
    while (stat >> key)
        if (key == "btime" && stat >> btime) break;
    REQUIRE(btime > 0);
    timespec boot{}, mono{};
    REQUIRE(::clock_gettime(CLOCK_BOOTTIME, &boot) == 0);
    REQUIRE(::clock_gettime(CLOCK_MONOTONIC, &mono) == 0);
    const int64_t suspended_ns = (boot.tv_sec - mono.tv_sec) * 1'000'000'000LL + (boot.tv_nsec - mono.tv_nsec);
    jobtrail::test::TempDir dir;
    BootClock c;
    REQUIRE(c.load(dir.path()).ok);
    INFO("offset " << c.offset_ns() << " btime " << btime << " suspended " << suspended_ns);
    CHECK(std::llabs(c.offset_ns() - btime * 1'000'000'000LL) < 2'000'000'000LL + suspended_ns);
    // A record stamped 5 s after boot happened 5 s after btime.
    CHECK(std::llabs(c.wall_ns(5'000'000) - (btime + 5) * 1'000'000'000LL) < 2'000'000'000LL + suspended_ns);
}

TEST_CASE("this boot's stored offset is used as it is, not derived again", "[kmsg]") {
    jobtrail::test::TempDir dir;
    std::ofstream(dir.path() + "/boot-offset") << BootClock::current_boot_id() << " 1700000000123456000\n";
    BootClock c;
    REQUIRE(c.load(dir.path()).ok);
    CHECK(c.offset_ns() == 1'700'000'000'123'456'000);
    CHECK(c.wall_ns(7) == 1'700'000'000'123'463'000);
    CHECK(c.boot_id() == BootClock::current_boot_id());
}
