#include "common/fs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <string>

#include "file_size_limit.hpp"
#include "skip.hpp"
#include "temp_dir.hpp"

using namespace jobtrail;
using jobtrail::test::TempDir;

namespace {

bool is_open(int fd) {
    return ::fcntl(fd, F_GETFD) != -1;
}

void put(const std::string& path, const std::string& content) {
    REQUIRE(write_file_atomic(path, content, 0644).ok);
}

int files_in(const std::string& dir) {
    int n = 0;
    DIR* d = ::opendir(dir.c_str());
    REQUIRE(d != nullptr);
    while (const dirent* e = ::readdir(d))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) ++n;
    ::closedir(d);
    return n;
}

}  // namespace

TEST_CASE("an Fd closes what it holds when it goes and when it is given another by a move", "[common]") {
    TempDir d;
    const std::string f = d.path() + "/f";
    put(f, "x");
    int raw = -1;
    {
        Fd fd(::open(f.c_str(), O_RDONLY | O_CLOEXEC));
        raw = fd.get();
        REQUIRE(is_open(raw));
    }
    CHECK_FALSE(is_open(raw));

    Fd a(::open(f.c_str(), O_RDONLY | O_CLOEXEC)), b(::open(f.c_str(), O_RDONLY | O_CLOEXEC));
    const int fa = a.get(), fb = b.get();
    b = std::move(a);
    CHECK(b.get() == fa);
    CHECK_FALSE(a.valid());
    CHECK_FALSE(is_open(fb));
    CHECK(is_open(fa));
}

TEST_CASE("an Fd holding descriptor 0 closes it too", "[common]") {
    // A daemon started with stdin closed gets 0 from its first open().
    TempDir d;
    const std::string f = d.path() + "/f";
    put(f, "x");
    const int saved = ::dup(0);  // -1 when this test itself was started with stdin closed
    const int other = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(other >= 0);
    REQUIRE(::dup2(other, 0) == 0);
    if (other != 0) ::close(other);
    { Fd zero(0); }
    const bool closed = !is_open(0);
    if (saved >= 0) {
        ::dup2(saved, 0);
        ::close(saved);
    }
    CHECK(closed);
}

TEST_CASE("make_dirs creates every missing directory of a path and says which one it cannot", "[common]") {
    TempDir d;
    CHECK(make_dirs(d.path() + "/a/b/c", 0750).ok);
    struct stat st {};
    REQUIRE(::stat((d.path() + "/a/b/c").c_str(), &st) == 0);
    CHECK(S_ISDIR(st.st_mode));
    CHECK(make_dirs(d.path() + "/a/b/c", 0750).ok);  // already there
    CHECK(make_dirs(d.path() + "/a/b/", 0750).ok);

    const auto empty = make_dirs("", 0750);
    CHECK_FALSE(empty.ok);
    CHECK(empty.error == "empty directory path");

    put(d.path() + "/file", "x");
    const auto under_file = make_dirs(d.path() + "/file/sub", 0750);
    CHECK_FALSE(under_file.ok);
    CHECK(under_file.error == "cannot create directory " + d.path() + "/file/sub: " + errno_text(ENOTDIR));
    const auto is_file = make_dirs(d.path() + "/file", 0750);
    CHECK_FALSE(is_file.ok);
    CHECK(is_file.error == d.path() + "/file exists and is not a directory");
}

TEST_CASE("make_dirs accepts a link only to a root-owned directory", "[common][hostile]") {
    TempDir d;
    const std::string to_root = d.path() + "/to_root", to_file = d.path() + "/to_file";
    REQUIRE(::symlink("/", to_root.c_str()) == 0);
    REQUIRE(::symlink("/etc/passwd", to_file.c_str()) == 0);  // root's, but not a directory
    CHECK(make_dirs(to_root, 0750).ok);
    const auto refused = make_dirs(to_file, 0750);
    CHECK_FALSE(refused.ok);
    CHECK(refused.error == to_file + " is a symlink to something that is not a root-owned directory");

    const std::string users = d.path() + "/users", to_users = d.path() + "/to_users";
    REQUIRE(::mkdir(users.c_str(), 0755) == 0);
    if (::geteuid() == 0) REQUIRE(::chown(users.c_str(), 65534, 65534) == 0);
    REQUIRE(::symlink(users.c_str(), to_users.c_str()) == 0);
    CHECK_FALSE(make_dirs(to_users, 0750).ok);
}

TEST_CASE("open_append_safe opens a regular file of one link and refuses anything else", "[common][hostile]") {
    TempDir d;
    auto fd = open_append_safe(d.path(), "log", 0640);
    REQUIRE(fd.ok);
    CHECK((::fcntl(fd.value.get(), F_GETFL) & O_NONBLOCK) == 0);  // writes block as on any file
    CHECK(write_all(fd.value.get(), "one\n"));
    auto again = open_append_safe(d.path(), "log", 0640);
    REQUIRE(again.ok);
    CHECK(write_all(again.value.get(), "two\n"));
    CHECK(read_small_file(d.path() + "/log") == "one\ntwo\n");

    const auto no_dir = open_append_safe(d.path() + "/none", "log", 0640);
    CHECK_FALSE(no_dir.ok);
    CHECK(no_dir.error == "cannot open directory " + d.path() + "/none: " + errno_text(ENOENT));

    REQUIRE(::symlink((d.path() + "/log").c_str(), (d.path() + "/link").c_str()) == 0);
    const auto link = open_append_safe(d.path(), "link", 0640);
    CHECK_FALSE(link.ok);
    CHECK(link.error == "cannot open " + d.path() + "/link: " + errno_text(ELOOP));

    REQUIRE(::link((d.path() + "/log").c_str(), (d.path() + "/hard").c_str()) == 0);
    const auto hard = open_append_safe(d.path(), "hard", 0640);
    CHECK_FALSE(hard.ok);
    CHECK(hard.error == d.path() + "/hard has other hard links; refusing to write");

    const auto dev = open_append_safe("/dev", "null", 0640);
    CHECK_FALSE(dev.ok);
    CHECK(dev.error == "/dev/null is not a regular file");
}

TEST_CASE("an atomic write that fails part way says why and leaves no temporary file", "[common][hostile]") {
    TempDir d;
    const std::string path = d.path() + "/state.json";
    REQUIRE(write_file_atomic(path, "old\n", 0644, true).ok);
    CHECK(read_small_file(path) == "old\n");
    {
        jobtrail::test::FileSizeLimit limit(1024);
        const auto st = write_file_atomic(path, std::string(4096, 'x'), 0644);
        CHECK_FALSE(st.ok);
        CHECK(st.error.starts_with("cannot write " + path + ".tmp."));
        CHECK(st.error.ends_with(": " + errno_text(EFBIG)));
    }
    CHECK(read_small_file(path) == "old\n");
    CHECK(files_in(d.path()) == 1);

    // A directory in the way of the rename.
    const std::string dir = d.path() + "/dir";
    REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
    REQUIRE(::mkdir((dir + "/x").c_str(), 0755) == 0);
    const auto st = write_file_atomic(dir, "new\n", 0644);
    CHECK_FALSE(st.ok);
    CHECK(st.error.starts_with("cannot rename " + dir + ".tmp."));
    CHECK(files_in(d.path()) == 2);

    const auto nowhere = write_file_atomic(d.path() + "/none/f", "x", 0644);
    CHECK_FALSE(nowhere.ok);
    CHECK(nowhere.error.starts_with("cannot create " + d.path() + "/none/f.tmp."));
}

TEST_CASE("create_file_exclusive: the first writer's content stays and the second is told", "[common]") {
    TempDir d;
    const std::string path = d.path() + "/boot_id";
    bool created = false;
    REQUIRE(create_file_exclusive(path, "first\n", 0644, &created).ok);
    CHECK(created);
    REQUIRE(create_file_exclusive(path, "second\n", 0644, &created).ok);
    CHECK_FALSE(created);
    CHECK(read_small_file(path) == "first\n");
    CHECK(files_in(d.path()) == 1);
    CHECK(create_file_exclusive(d.path() + "/other", "x", 0644, nullptr).ok);
    CHECK_FALSE(create_file_exclusive(d.path() + "/none/f", "x", 0644, &created).ok);
}

TEST_CASE("open_read_safe says which refusal and why for each kind of path", "[common][hostile]") {
    TempDir d;
    const std::string file = d.path() + "/nccl.log";
    put(file, "line\n");
    const SafeFile ok = open_read_safe(file);
    CHECK(ok.refused == Refusal::kNone);
    CHECK(ok.error.empty());
    REQUIRE(ok.fd.valid());
    char c = 0;
    CHECK(::read(ok.fd.get(), &c, 1) == 1);
    CHECK(c == 'l');
    CHECK(ok.st.st_size == 5);

    auto refused = [](const std::string& path, Refusal want, const std::string& why) {
        INFO(path);
        const SafeFile f = open_read_safe(path);
        CHECK(f.refused == want);
        CHECK(f.error == path + ": " + why);
        CHECK_FALSE(f.fd.valid());
        CHECK(std::string(refusal_name(f.refused)) == refusal_name(want));
    };
    refused(d.path() + "/none", Refusal::kMissing, "gone");
    refused(d.path() + "/gone/x.log", Refusal::kMissing, "directory is gone");
    refused(d.path() + "/", Refusal::kNotRegular, "not a file name");
    refused(d.path() + "/.", Refusal::kNotRegular, "not a file name");
    refused(d.path() + "/..", Refusal::kNotRegular, "not a file name");

    REQUIRE(::symlink(file.c_str(), (d.path() + "/link.log").c_str()) == 0);
    refused(d.path() + "/link.log", Refusal::kSymlink, "is a symbolic link");
    REQUIRE(::symlink(d.path().c_str(), (d.path() + "/linkdir").c_str()) == 0);
    // O_NOFOLLOW with O_DIRECTORY says ENOTDIR for a link as the directory; ELOOP for a loop above it.
    refused(d.path() + "/linkdir/nccl.log", Refusal::kSymlink, "cannot open its directory: " + errno_text(ENOTDIR));
    REQUIRE(::symlink("loop", (d.path() + "/loop").c_str()) == 0);
    refused(d.path() + "/loop/sub/nccl.log", Refusal::kSymlink, "cannot open its directory: " + errno_text(ELOOP));
    refused(file + "/x", Refusal::kSymlink, "cannot open its directory: " + errno_text(ENOTDIR));
    const std::string long_dir = d.path() + "/" + std::string(300, 'd');
    refused(long_dir + "/x", Refusal::kUnreadable, "cannot open its directory: " + errno_text(ENAMETOOLONG));
    refused(d.path() + "/" + std::string(300, 'f'), Refusal::kUnreadable, "cannot open: " + errno_text(ENAMETOOLONG));

    REQUIRE(::mkfifo((d.path() + "/fifo").c_str(), 0600) == 0);
    refused(d.path() + "/fifo", Refusal::kNotRegular, "is not a regular file");
    REQUIRE(::link(file.c_str(), (d.path() + "/hard.log").c_str()) == 0);
    refused(d.path() + "/hard.log", Refusal::kHardLinked, "has other hard links");
}

TEST_CASE("open_read_safe keeps the directory owner's and root's files and refuses another user's",
          "[common][hostile]") {
    if (::geteuid() != 0) JOBTRAIL_SKIP("needs root to give files to another user");
    TempDir d;
    const std::string users = d.path() + "/user";
    REQUIRE(::mkdir(users.c_str(), 0755) == 0);
    REQUIRE(::chown(users.c_str(), 65534, 65534) == 0);
    put(users + "/own.log", "x");
    REQUIRE(::chown((users + "/own.log").c_str(), 65534, 65534) == 0);
    put(users + "/root.log", "x");
    CHECK(open_read_safe(users + "/own.log").refused == Refusal::kNone);
    CHECK(open_read_safe(users + "/root.log").refused == Refusal::kNone);

    put(d.path() + "/theirs.log", "x");
    REQUIRE(::chown((d.path() + "/theirs.log").c_str(), 65534, 65534) == 0);
    const SafeFile f = open_read_safe(d.path() + "/theirs.log");
    CHECK(f.refused == Refusal::kForeignOwner);
    CHECK(f.error == d.path() + "/theirs.log: is owned by uid 65534, not by its directory's owner (uid 0)");
    CHECK_FALSE(f.fd.valid());
}

TEST_CASE("read_small_file reads a file of any size up to its cap and fails on what it cannot read", "[common]") {
    TempDir d;
    put(d.path() + "/empty", "");
    CHECK(read_small_file(d.path() + "/empty") == "");
    const std::string big(20000, 'b');
    put(d.path() + "/big", big);
    CHECK(read_small_file(d.path() + "/big") == big);
    CHECK(read_small_file(d.path() + "/big", 4) == "bbbb");
    CHECK(read_small_file(d.path() + "/big", 20000) == big);
    CHECK_FALSE(read_small_file(d.path() + "/none"));
    CHECK_FALSE(read_small_file(d.path()));  // a directory: read() fails with EISDIR
}

TEST_CASE("a held lock names the holder's pid as written without its newline", "[common]") {
    TempDir d;
    const std::string path = d.path() + "/shipper.lock";
    auto hold = [&](const std::string& content) {
        put(path, content);
        Fd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
        REQUIRE(::flock(fd.get(), LOCK_EX | LOCK_NB) == 0);
        return fd;
    };
    {
        const Fd h = hold("4242 \n");
        CHECK(lock_exclusive(path).error == path + " is held by another process (pid 4242)");
    }
    {
        const Fd h = hold("");
        CHECK(lock_exclusive(path).error == path + " is held by another process (pid ?)");
    }
    {
        const Fd h = hold("\n");
        CHECK(lock_exclusive(path).error == path + " is held by another process (pid )");
    }
    {
        // At most 31 bytes of whatever is there.
        const Fd h = hold(std::string(40, '7') + "\n");
        CHECK(lock_exclusive(path).error == path + " is held by another process (pid " + std::string(31, '7') + ")");
    }
    auto mine = lock_exclusive(path);
    REQUIRE(mine.ok);
    CHECK(read_small_file(path) == std::to_string(::getpid()) + "\n");
}
