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

TEST_CASE("the output directory is reached through 40 links of ours, a 41st is too many", "[forensics]") {
    const test::TempDir d;
    fs::create_directory(d.path() + "/real");
    // l1 -> l2 -> ... -> l40 -> real, and m1 -> ... -> m41 -> real: relative links, all ours.
    for (const auto& [stem, count] : {std::pair<std::string, int>{"l", 40}, {"m", 41}})
        for (int i = 1; i <= count; ++i)
            fs::create_symlink(i == count ? "real" : stem + std::to_string(i + 1),
                               d.path() + "/" + stem + std::to_string(i));
    {
        auto forty = StagingDir::create(d.path() + "/l1/out", ".jobtrail-job77");
        REQUIRE(forty.ok);
        CHECK(fs::is_directory(d.path() + "/real/out"));
    }
    const auto too_many = StagingDir::create(d.path() + "/m1/out", ".jobtrail-job77");
    CHECK_FALSE(too_many.ok);
    CHECK(too_many.error ==
          "cannot use the output directory " + d.path() + "/m1/out: Too many levels of symbolic links");
}

TEST_CASE("a link of another user's past a link of ours is named where it is, not below our link",
          "[forensics][hostile]") {
    if (::geteuid() != 0) JOBTRAIL_SKIP("links of another user need root");
    const test::TempDir d;
    const std::string victim = d.path() + "/etc", tmp = d.path() + "/tmp";
    fs::create_directories(victim);
    fs::create_directories(tmp);
    ::chmod(tmp.c_str(), 01777);
    fs::create_directory_symlink(victim, tmp + "/x");
    REQUIRE(::lchown((tmp + "/x").c_str(), 65534, 65534) == 0);
    fs::create_directory_symlink(tmp, d.path() + "/abs");    // ours, to an absolute path
    fs::create_directory_symlink("tmp", d.path() + "/rel");  // ours, relative to its directory
    for (const std::string via : {"abs", "rel"}) {
        INFO("through " << via);
        const auto r = StagingDir::create(d.path() + "/" + via + "/x/out", ".jobtrail-job77");
        CHECK_FALSE(r.ok);
        CHECK(r.error == "cannot use the output directory " + d.path() + "/" + via + "/x/out: " + tmp +
                             "/x is a symbolic link owned by uid 65534, not followed: give the directory it points "
                             "to, if it is the one meant");
    }
    CHECK(fs::is_empty(victim));
}

TEST_CASE("the last alternative name -16 is claimed when the name and -2 to -15 are taken", "[forensics]") {
    const test::TempDir d;
    const std::string out = d.path() + "/out";
    auto made = StagingDir::create(out, ".jobtrail-job77");
    REQUIRE(made.ok);
    for (int n = 1; n <= 15; ++n) std::ofstream(out + "/c" + (n == 1 ? "" : "-" + std::to_string(n)) + ".tar.zst");
    const auto stem = made.value.claim_output("c", ".tar.zst");
    REQUIRE(stem.ok);
    CHECK(stem.value == "c-16");
    CHECK(fs::exists(out + "/c-16.tar.zst.sha256"));
}

TEST_CASE("the staging directory is emptied 16 directories deep and no deeper", "[forensics]") {
    const test::TempDir d;
    const std::string out = d.path() + "/out";
    for (const int depth : {16, 17}) {
        INFO(depth << " directories deep");
        std::string rel;
        for (int i = 0; i < depth; ++i) rel += "a/";
        std::string path;
        {
            auto made = StagingDir::create(out, ".jobtrail-job77");
            REQUIRE(made.ok);
            REQUIRE(made.value.write_file(rel + "f", "x").ok);
            path = made.value.path();
        }
        if (depth == 16) {
            CHECK_FALSE(fs::exists(path));
        } else {
            CHECK(slurp(path + "/" + rel + "f") == "x");  // too deep to be the bundle's: left
            fs::remove_all(path);
        }
    }
}

TEST_CASE("an empty directory put at the staging directory's name is left alone", "[forensics][hostile]") {
    const test::TempDir d;
    const std::string out = d.path() + "/out";
    auto made = StagingDir::create(out, ".jobtrail-job77");
    REQUIRE(made.ok);
    REQUIRE(made.value.write_file("nodes/n1/prolog.log", "line\n").ok);
    const std::string planted = made.value.path(), moved = out + "/moved-away";
    fs::rename(planted, moved);
    fs::create_directory(planted);
    { StagingDir gone = std::move(made.value); }
    CHECK(fs::is_directory(planted));
    CHECK(fs::is_empty(moved));
}

TEST_CASE("a stream is read line by line without the newline and its last line may lack one", "[forensics]") {
    const test::TempDir d;
    std::ofstream(d.path() + "/f") << "first\n\nlast";
    auto f = open_stream(Fd(::open((d.path() + "/f").c_str(), O_RDONLY | O_CLOEXEC)), "r", "f");
    REQUIRE(f.ok);
    LineReader in(f.value.get());
    std::vector<std::string> lines;
    for (std::string l; in.next(l);) lines.push_back(l);
    CHECK(lines == std::vector<std::string>{"first", "", "last"});
}
