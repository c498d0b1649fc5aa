#include "forensics/staging_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "temp_dir.hpp"

using namespace jobtrail;
using namespace jobtrail::forensics;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string read_fd(int fd) {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    return out;
}

}  // namespace

TEST_CASE("a staging directory is made fresh and private and reached only through its descriptors",
          "[forensics][hostile]") {
    const test::TempDir d;
    const std::string out = d.path() + "/out", outside = d.path() + "/outside";
    fs::create_directories(outside);
    std::ofstream(outside + "/keep") << "root's\n";

    auto made = StagingDir::create(out, ".jobtrail-job77");  // out is made, as by mkdir -p
    REQUIRE(made.ok);
    StagingDir& s = made.value;
    const std::string name = fs::path(s.path()).filename().string();
    CHECK(name.starts_with(".jobtrail-job77.tmp."));
    CHECK(name.ends_with(".partial"));
    struct stat st {};
    REQUIRE(::lstat(s.path().c_str(), &st) == 0);
    CHECK(S_ISDIR(st.st_mode));
    CHECK((st.st_mode & 07777) == 0700);
    CHECK(st.st_uid == ::geteuid());
    // Another is another name: a planted one is never ours.
    auto other = StagingDir::create(out, ".jobtrail-job77");
    REQUIRE(other.ok);
    CHECK(other.value.path() != s.path());

    REQUIRE(s.write_file("nodes/n1/prolog.log", "line\n").ok);
    auto back = s.open_file("nodes/n1/prolog.log", O_RDONLY);
    REQUIRE(back.ok);
    CHECK(read_fd(back.value.get()) == "line\n");
    const auto again = s.create_file("nodes/n1/prolog.log");  // created once, never reused
    CHECK_FALSE(again.ok);
    CHECK(again.error.find(s.path() + "/nodes/n1/prolog.log") != std::string::npos);

    // A link inside, as only root could put there now: neither followed to create nor to read.
    fs::rename(s.path() + "/nodes", s.path() + "/nodes.old");
    fs::create_directory_symlink(outside, s.path() + "/nodes");
    CHECK_FALSE(s.create_file("nodes/n1/x.log").ok);
    CHECK_FALSE(s.open_file("nodes/keep", O_RDONLY).ok);
    fs::create_symlink(outside + "/keep", s.path() + "/top.log");
    CHECK_FALSE(s.open_file("top.log", O_RDONLY).ok);
    CHECK(fs::directory_iterator(outside)->path().filename() == "keep");

    // Whoever can write out_dir renames ours away and puts their own at its name: ours is
    // emptied (its links removed, not followed), theirs is left alone.
    const std::string moved = out + "/moved-away";
    fs::rename(s.path(), moved);
    fs::create_directory(s.path());
    std::ofstream(s.path() + "/theirs") << "x";
    const std::string planted = s.path();
    { StagingDir gone = std::move(s); }
    CHECK(fs::is_empty(moved));
    CHECK(slurp(planted + "/theirs") == "x");
    CHECK(slurp(outside + "/keep") == "root's\n");
    fs::remove_all(planted);
    fs::remove(moved);
    { StagingDir gone = std::move(other.value); }
    CHECK(fs::is_empty(out));  // both removed, nothing left
}

TEST_CASE("an output file replaces a link at its name and is gone unless published", "[forensics][hostile]") {
    const test::TempDir d;
    const std::string out = d.path() + "/out", secret = d.path() + "/secret";
    std::ofstream(secret) << "TOPSECRET\n";
    auto made = StagingDir::create(out, ".jobtrail-job77");
    REQUIRE(made.ok);
    fs::create_symlink(secret, out + "/a.tar.zst");
    {
        auto f = made.value.create_output("a.tar.zst", 0600);
        REQUIRE(f.ok);
        REQUIRE(write_all(f.value.fd(), "archive"));
        REQUIRE(f.value.publish().ok);
        auto unpublished = made.value.create_output("b.tar.zst", 0600);
        REQUIRE(unpublished.ok);
        REQUIRE(write_all(unpublished.value.fd(), "half"));
    }
    struct stat st {};
    REQUIRE(::lstat((out + "/a.tar.zst").c_str(), &st) == 0);
    CHECK(S_ISREG(st.st_mode));
    CHECK((st.st_mode & 07777) == 0600);
    CHECK(slurp(out + "/a.tar.zst") == "archive");
    CHECK(slurp(secret) == "TOPSECRET\n");
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(out)) left.push_back(e.path().filename().string());
    CHECK(left.size() == 2);  // a.tar.zst and the staging directory: no temporary file, no b
    CHECK(std::count(left.begin(), left.end(), "a.tar.zst") == 1);
}

TEST_CASE("an output directory that cannot be used is an error naming it", "[forensics]") {
    const test::TempDir d;
    std::ofstream(d.path() + "/file") << "x";
    const auto r = StagingDir::create(d.path() + "/file", ".jobtrail-job77");
    CHECK_FALSE(r.ok);
    CHECK(r.error == "cannot open the output directory " + d.path() + "/file: Not a directory");
}
