#include "shipper/sources/file/fingerprint.hpp"

#include <fcntl.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "common/fs.hpp"
#include "kmsgfs_mount.hpp"

using namespace jobtrail::shipper;

TEST_CASE("a fingerprint knows a file by its first bytes: growth keeps it, a rewrite does not", "[file]") {
    jobtrail::test::TempDir dir;
    const std::string path = dir.path() + "/a.log";
    const auto open = [&] { return jobtrail::Fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)); };
    std::ofstream(path) << "";
    const std::string empty = fingerprint(open().get(), 0);
    CHECK(fingerprint_empty(empty));
    std::ofstream(path) << "first line\n";
    const std::string first = fingerprint(open().get(), 11);
    CHECK_FALSE(fingerprint_empty(first));
    CHECK_FALSE(fingerprint_full(first));
    std::ofstream(path, std::ios::app) << "second line\n";
    CHECK(same_file(open().get(), first));  // grown: the same file
    std::ofstream(path, std::ios::app) << std::string(300, 'x') << "\n";
    const std::string full = fingerprint(open().get(), 324);
    CHECK(fingerprint_full(full));  // taken of all it can be: kept as the file grows
    std::ofstream(path) << "FIRST LINE\n" << std::string(300, 'x') << "\n";
    CHECK_FALSE(same_file(open().get(), first));  // rewritten from its start: another file
    CHECK_FALSE(same_file(open().get(), full));
    CHECK_FALSE(same_file(open().get(), "not a fingerprint"));
}
