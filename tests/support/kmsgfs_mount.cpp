#include "kmsgfs_mount.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

namespace jobtrail::test {

KmsgfsMount::KmsgfsMount(size_t ring_bytes) {
    const std::string mnt = dir() + "/mnt";
    REQUIRE(::mkdir(mnt.c_str(), 0755) == 0);
    const std::string rb = std::to_string(ring_bytes);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
        const int devnull = ::open("/dev/null", O_WRONLY);
        ::dup2(devnull, 1);
        ::execl(JOBTRAIL_KMSGFS_BIN, "kmsgfs", mnt.c_str(), "--ring-bytes", rb.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    // The file appears once the mount is live: seconds on a loaded 2-core machine.
    for (int i = 0; i < 1000; ++i) {
        struct stat st {};
        if (::stat(kmsg().c_str(), &st) == 0) return;
        // -1 (ECHILD): reaped already, where SIGCHLD is ignored.
        if (const pid_t w = ::waitpid(pid_, nullptr, WNOHANG); w == pid_ || w < 0) {
            pid_ = -1;
            FAIL("kmsgfs exited before it mounted " << mnt << " (is /dev/fuse available?)");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // The destructor does not run for a constructor that throws: no daemon left holding the
    // test's standard error (a caller reading it to its end would wait for ever).
    ::umount2(mnt.c_str(), MNT_DETACH);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    FAIL("kmsgfs did not come up at " << mnt << " within 10 s");
}

// The mount goes first: dir_ (a TempDir) is removed after this body.
KmsgfsMount::~KmsgfsMount() {
    const std::string mnt = dir() + "/mnt";
    ::umount2(mnt.c_str(), MNT_DETACH);
    if (pid_ > 0) {
        ::kill(pid_, SIGTERM);
        ::waitpid(pid_, nullptr, 0);
    }
}

void KmsgfsMount::ctl(const std::string& commands) const {
    const std::string path = dir() + "/mnt/ctl";
    const int fd = ::open(path.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    const ssize_t n = ::write(fd, commands.data(), commands.size());
    ::close(fd);
    REQUIRE(n == static_cast<ssize_t>(commands.size()));
}

}  // namespace jobtrail::test
