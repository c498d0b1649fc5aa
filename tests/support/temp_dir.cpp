#include "temp_dir.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>

namespace jobtrail::test {

TempDir::TempDir(const std::string& name) {
    std::string tmpl = "/tmp/jobtrail-" + name + "-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

}  // namespace jobtrail::test
