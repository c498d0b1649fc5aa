#pragma once

#include <string>

namespace jobtrail::test {

// A scratch directory, /tmp/jobtrail-<name>-XXXXXX, removed with everything in it at the end of
// the test (also when a REQUIRE fails).
class TempDir {
public:
    explicit TempDir(const std::string& name = "test");
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::string& path() const { return path_; }

private:
    std::string path_;
};

}  // namespace jobtrail::test
