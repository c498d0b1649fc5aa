#include "forensics/bundle/staging.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "file_size_limit.hpp"
#include "temp_dir.hpp"

using namespace jobtrail::forensics;

namespace {

// A staging directory holding a node's job log with its kernel lines written after the lines
// around them, hours earlier in time: staged out of order, put in order at close. 129 other
// files in between: the 128 open streams are closed, so what was written so far is on disk
// before the close.
StagingDir staging_dir(const std::string& out) {
    auto made = StagingDir::create(out, ".jobtrail-t");
    REQUIRE(made.ok);
    return std::move(made.value);
}

struct Unordered {
    jobtrail::test::TempDir d;
    StagingDir dir = staging_dir(d.path() + "/out");
    bundle::Staging st{dir};
    const std::string path = dir.path() + "/nodes/n1/job.log";
    Unordered() {
        for (int i = 300; i > 0; --i)
            st.write("nodes/n1/job.log", 1'795'989'142'000'000'000 + int64_t{i} * 1'000'000'000,
                     "kernel: line " + std::to_string(i) + std::string(40 + i % 7, '.'));
        for (int i = 0; i < 129; ++i) st.write("other/" + std::to_string(i) + ".log", 1'795'989'142'000'000'000, "x");
    }
};

}  // namespace

TEST_CASE("staged lines written out of time order are put in order at close", "[forensics]") {
    Unordered u;
    u.st.close();
    std::ifstream in(u.path);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    REQUIRE(lines.size() == 300);
    CHECK(lines.front().find(" kernel: line 1.") != std::string::npos);
    CHECK(lines.back().find(" kernel: line 300.") != std::string::npos);
    CHECK(std::is_sorted(lines.begin(), lines.end()));
}

TEST_CASE("a staged file the disk cuts while it is put in order fails the close, naming it", "[forensics]") {
    // Its first write got through; the rewrite in order is refused its last byte. A bundle
    // with the file cut short must fail, never go out as complete.
    Unordered u;
    struct stat sb {};
    REQUIRE(::stat(u.path.c_str(), &sb) == 0);
    const auto size = static_cast<rlim_t>(sb.st_size);
    REQUIRE(size % 8192 != 0);  // the last bytes wait in the stream's buffer until it is flushed
    REQUIRE(size % 4096 != 0);
    std::string error;
    {
        const jobtrail::test::FileSizeLimit full(size - 1);
        try {
            u.st.close();
        } catch (const std::exception& e) {
            error = e.what();
        }
    }
    INFO(error);
    CHECK(error.find("cannot write " + u.path) != std::string::npos);
    CHECK(error.find("File too large") != std::string::npos);
}
