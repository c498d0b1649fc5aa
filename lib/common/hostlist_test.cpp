#include "common/hostlist.hpp"

#include <catch2/catch.hpp>

using namespace jobtrail;

namespace {
std::vector<std::string> hosts(std::string_view list) {
    auto r = expand_hostlist(list);
    INFO(r.error);
    REQUIRE(r.ok);
    return r.value;
}
std::string error_of(std::string_view list, size_t max = 16384) {
    auto r = expand_hostlist(list, max);
    REQUIRE_FALSE(r.ok);
    return r.error;
}
}  // namespace

TEST_CASE("Slurm hostlists expand as scontrol show hostnames does", "[common][hostlist]") {
    CHECK(hosts("jt[01-04]") == std::vector<std::string>{"jt01", "jt02", "jt03", "jt04"});
    CHECK(hosts("gpu[01-02,07],login1") == std::vector<std::string>{"gpu01", "gpu02", "gpu07", "login1"});
    CHECK(hosts("vm") == std::vector<std::string>{"vm"});
    CHECK(hosts("a,b.example") == std::vector<std::string>{"a", "b.example"});
    // The width is the first number's: [9-10] is not padded, [098-100] is.
    CHECK(hosts("n[9-10]") == std::vector<std::string>{"n9", "n10"});
    CHECK(hosts("n[098-100]") == std::vector<std::string>{"n098", "n099", "n100"});
    // Bracket groups multiply, suffixes follow.
    CHECK(hosts("r[1-2]n[1-2]-ib") == std::vector<std::string>{"r1n1-ib", "r1n2-ib", "r2n1-ib", "r2n2-ib"});
    CHECK(hosts("gpu[001-064]").size() == 64);
    CHECK(hosts("gpu[001-064]").back() == "gpu064");
}

TEST_CASE("a hostlist that is not one is refused, saying what and where", "[common][hostlist][hostile]") {
    CHECK(error_of("") == "hostlist is empty");
    CHECK(error_of("jt[01-04") == "hostlist \"jt[01-04\": '[' without ']' at byte 2");
    CHECK(error_of("jt01]") == "hostlist \"jt01]\": ']' without '[' at byte 4");
    CHECK(error_of("jt[04-01]") == "hostlist \"jt[04-01]\": a range that ends before it starts (04-01) at byte 8");
    CHECK(error_of("jt[]") == "hostlist \"jt[]\": a range without a number at byte 3");
    CHECK(error_of("jt[1-]") == "hostlist \"jt[1-]\": a range without its end at byte 5");
    CHECK(error_of("jt[1x]") == "hostlist \"jt[1x]\": 'x' in a range at byte 4");
    CHECK(error_of("a,,b") == "hostlist \"a,,b\": an empty host name at byte 2");
    CHECK(error_of("a,") == "hostlist \"a,\": an empty host name at byte 2");
    CHECK(error_of("a b") == "hostlist \"a b\": a byte that is not a host name character at byte 1");
    CHECK(error_of("a/../b") == "hostlist \"a/../b\": a byte that is not a host name character at byte 1");
    CHECK(error_of("n[1234567890-1234567891]").find("longer than 9 digits") != std::string::npos);
}

TEST_CASE("a hostlist is held to a number of hosts and a name length, however it multiplies",
          "[common][hostlist][hostile]") {
    CHECK(expand_hostlist("n[1-16384]").ok);
    CHECK(error_of("n[1-16385]") == "hostlist \"n[1-16385]\": more than 16384 hosts at byte 9");
    // 1000^3 names from 30 bytes: refused before any is made.
    CHECK(error_of("a[1-1000]b[1-1000]c[1-1000]").find("more than 16384 hosts") != std::string::npos);
    CHECK(error_of("n[1-3],m[1-3]", 5).find("more than 5 hosts") != std::string::npos);
    CHECK(error_of(std::string(256, 'a')).find("over 255 bytes") != std::string::npos);
    CHECK(expand_hostlist(std::string(255, 'a')).ok);
}

TEST_CASE("every host name character is kept and the bytes next to them are refused", "[common][hostlist]") {
    CHECK(hosts("az-AZ_09.x,b") == std::vector<std::string>{"az-AZ_09.x", "b"});
    for (const char c : {'a', 'z', 'A', 'Z', '0', '9', '-', '_', '.'}) {
        const std::string name = std::string("n") + c;
        CHECK(hosts(name) == std::vector<std::string>{name});
    }
    for (const char c : {'`', '{', '@', '/', ':', '+', '*', '\0'}) {
        const std::string list = std::string("n") + c;
        INFO(int(c));
        CHECK(error_of(list) == "hostlist \"" + list + "\": a byte that is not a host name character at byte 1");
    }
}

TEST_CASE("a range of one number and a number of nine digits expand and a byte in a range is named",
          "[common][hostlist]") {
    CHECK(hosts("n[5-5]") == std::vector<std::string>{"n5"});
    CHECK(hosts("n[7]") == std::vector<std::string>{"n7"});
    CHECK(hosts("n[0]") == std::vector<std::string>{"n0"});
    CHECK(hosts("n[123456789]") == std::vector<std::string>{"n123456789"});
    CHECK(error_of("n[1234567890]") == "hostlist \"n[1234567890]\": a range number longer than 9 digits at byte 12");
    CHECK(error_of("n[1-1234567890]") ==
          "hostlist \"n[1-1234567890]\": a range number longer than 9 digits at byte 14");
    CHECK(error_of("jt[1 ]") == "hostlist \"jt[1 ]\": '?' in a range at byte 4");
}

TEST_CASE("hosts named before a bracket group count against the limit", "[common][hostlist][hostile]") {
    CHECK(expand_hostlist("a,b,c", 3).ok);
    CHECK(error_of("a,b,c,d", 3) == "hostlist \"a,b,c,d\": more than 3 hosts at byte 7");
    CHECK(expand_hostlist("a,n[1-4]", 5).ok);
    CHECK(error_of("a,n[1-5]", 5) == "hostlist \"a,n[1-5]\": more than 5 hosts at byte 3");
    CHECK(expand_hostlist("n[1-5]", 5).ok);
}

TEST_CASE("a hostlist is read to its last byte and not past it", "[common][hostlist][hostile]") {
    for (const std::string list : {"gpu01", "gpu[01-02]", "a,b"}) {
        INFO(list);
        const std::vector<char> exact(list.begin(), list.end());
        const auto r = expand_hostlist(std::string_view(exact.data(), exact.size()));
        CHECK(r.ok);
    }
}
