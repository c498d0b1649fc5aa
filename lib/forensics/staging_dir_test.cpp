#include "forensics/staging_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "skip.hpp"
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

TEST_CASE("an output file is renamed onto its claimed name and is gone unless published", "[forensics][hostile]") {
    const test::TempDir d;
    const std::string out = d.path() + "/out", secret = d.path() + "/secret";
    std::ofstream(secret) << "TOPSECRET\n";
    auto made = StagingDir::create(out, ".jobtrail-job77");
    REQUIRE(made.ok);
    fs::create_symlink(secret, out + "/a.tar.zst");
    REQUIRE(made.value.claim_output("a", ".tar.zst").value == "a-2");  // the link is theirs
    {
        auto f = made.value.create_output("a-2.tar.zst", 0600);
        REQUIRE(f.ok);
        REQUIRE(write_all(f.value.fd(), "archive"));
        REQUIRE(f.value.publish().ok);
        auto unpublished = made.value.create_output("b.tar.zst", 0600);
        REQUIRE(unpublished.ok);
        REQUIRE(write_all(unpublished.value.fd(), "half"));
    }
    struct stat st {};
    REQUIRE(::lstat((out + "/a-2.tar.zst").c_str(), &st) == 0);
    CHECK(S_ISREG(st.st_mode));
    CHECK((st.st_mode & 07777) == 0600);
    CHECK(slurp(out + "/a-2.tar.zst") == "archive");
    CHECK(fs::read_symlink(out + "/a.tar.zst") == secret);
    CHECK(slurp(secret) == "TOPSECRET\n");
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(out)) left.push_back(e.path().filename().string());
    // The link, a-2.tar.zst, its claimed .sha256 and the staging directory: no temporary file, no b.
    CHECK(left.size() == 4);
    CHECK(std::count(left.begin(), left.end(), "a-2.tar.zst") == 1);
}

TEST_CASE("an output directory that cannot be used is an error naming it", "[forensics]") {
    const test::TempDir d;
    std::ofstream(d.path() + "/file") << "x";
    const auto r = StagingDir::create(d.path() + "/file", ".jobtrail-job77");
    CHECK_FALSE(r.ok);
    CHECK(r.error == "cannot use the output directory " + d.path() + "/file: Not a directory");
}

TEST_CASE("the output directory is reached through no link of another user's, and no one else controls it",
          "[forensics][hostile]") {
    const test::TempDir d;
    const std::string victim = d.path() + "/etc", tmp = d.path() + "/tmp";
    fs::create_directories(victim);
    fs::create_directories(tmp);
    ::chmod(tmp.c_str(), 01777);
    // Ours (or root's) links are followed, also to a directory made as by mkdir -p.
    fs::create_directory_symlink(tmp, d.path() + "/ours");
    auto via_ours = StagingDir::create(d.path() + "/ours/a/b", ".jobtrail-job77");
    REQUIRE(via_ours.ok);
    CHECK(fs::is_directory(tmp + "/a/b"));
    // Anyone may write it without the sticky bit: they could swap what we publish.
    const std::string open = d.path() + "/open";
    fs::create_directories(open);
    ::chmod(open.c_str(), 0777);
    const auto r = StagingDir::create(open, ".jobtrail-job77");
    CHECK_FALSE(r.ok);
    CHECK(r.error.find("no sticky bit") != std::string::npos);
    CHECK(fs::is_empty(open));
    if (::geteuid() != 0) JOBTRAIL_SKIP("links and directories of another user need root");
    fs::create_directory_symlink(victim, tmp + "/x");
    REQUIRE(::lchown((tmp + "/x").c_str(), 65534, 65534) == 0);
    const auto link = StagingDir::create(tmp + "/x/out", ".jobtrail-job77");
    CHECK_FALSE(link.ok);
    CHECK(link.error == "cannot use the output directory " + tmp + "/x/out: " + tmp +
                            "/x is a symbolic link owned by uid 65534, not followed: give the directory it points to, "
                            "if it is the one meant");
    CHECK(fs::is_empty(victim));
    const std::string users = tmp + "/users";
    fs::create_directories(users);
    REQUIRE(::chown(users.c_str(), 65534, 65534) == 0);
    const auto theirs = StagingDir::create(users, ".jobtrail-job77");
    CHECK_FALSE(theirs.ok);
    CHECK(theirs.error.find("owned by uid 65534") != std::string::npos);
    CHECK(fs::is_empty(users));
}

TEST_CASE("an output name someone took is left to them and the next one claimed", "[forensics][hostile]") {
    const test::TempDir d;
    const std::string out = d.path() + "/out";
    auto made = StagingDir::create(out, ".jobtrail-job77");
    REQUIRE(made.ok);
    fs::create_directory(out + "/a.tar.zst");                // a directory at the name
    std::ofstream(out + "/a-2.tar.zst.sha256") << "theirs";  // only the checksum's name taken
    auto stem = made.value.claim_output("a", ".tar.zst");
    REQUIRE(stem.ok);
    CHECK(stem.value == "a-3");
    CHECK(fs::is_directory(out + "/a.tar.zst"));
    CHECK(slurp(out + "/a-2.tar.zst.sha256") == "theirs");
    CHECK_FALSE(fs::exists(out + "/a-2.tar.zst"));  // a half claim is given back
    {
        auto f = made.value.create_output("a-3.tar.zst", 0600);
        REQUIRE(f.ok);
        REQUIRE(write_all(f.value.fd(), "archive"));
        REQUIRE(f.value.publish().ok);
    }
    CHECK(slurp(out + "/a-3.tar.zst") == "archive");
    // Every name taken: an error that says so, and nothing of ours left.
    for (int n = 1; n <= 16; ++n)
        fs::create_directory(out + "/b" + (n == 1 ? "" : "-" + std::to_string(n)) + ".tar.zst");
    const auto none = made.value.claim_output("b", ".tar.zst");
    CHECK_FALSE(none.ok);
    CHECK(none.error.find("b.tar.zst and its 15 alternatives") != std::string::npos);
    { StagingDir gone = std::move(made.value); }
    CHECK(slurp(out + "/a-3.tar.zst") == "archive");       // published: kept
    CHECK_FALSE(fs::exists(out + "/a-3.tar.zst.sha256"));  // claimed, never published: removed
}
