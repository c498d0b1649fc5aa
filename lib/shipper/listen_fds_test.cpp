#include "shipper/listen_fds.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

using namespace jobtrail;

TEST_CASE("socket activation: variables not meant for this process, or a count missing, pass nothing",
          "[metrics][listen]") {
    // A parent's LISTEN_PID (another process), our pid with no LISTEN_FDS, or a count that is no
    // number: no socket, no error, fd 3 (whoever holds it) left alone, and the variables gone so
    // that nothing started later takes them.
    const int saved = ::fcntl(3, F_DUPFD_CLOEXEC, 10);  // fd 3 as the test process has it, if open
    int pipe_fds[2];
    REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
    REQUIRE(::dup2(pipe_fds[0], 3) == 3);
    const std::string self = std::to_string(::getpid());
    struct Case {
        const char* pid;
        const char* fds;
    };
    for (const Case c :
         {Case{"1", "1"}, Case{self.c_str(), nullptr}, Case{self.c_str(), ""}, Case{self.c_str(), "x1"},
          Case{self.c_str(), "1x"}, Case{self.c_str(), "-1"}, Case{self.c_str(), "0"}, Case{nullptr, "1"}}) {
        INFO("LISTEN_PID=" << (c.pid ? c.pid : "(unset)") << " LISTEN_FDS=" << (c.fds ? c.fds : "(unset)"));
        ::unsetenv("LISTEN_PID");
        ::unsetenv("LISTEN_FDS");
        if (c.pid) ::setenv("LISTEN_PID", c.pid, 1);
        if (c.fds) ::setenv("LISTEN_FDS", c.fds, 1);
        ::setenv("LISTEN_FDNAMES", "metrics", 1);
        const Result<Fd> r = shipper::take_listen_socket();
        CHECK(r.ok);
        CHECK(!r.value.valid());
        CHECK(::fcntl(3, F_GETFD) != -1);
        CHECK(std::getenv("LISTEN_PID") == nullptr);
        CHECK(std::getenv("LISTEN_FDS") == nullptr);
        CHECK(std::getenv("LISTEN_FDNAMES") == nullptr);
    }
    if (saved >= 0) {
        ::dup2(saved, 3);
        ::close(saved);
    } else {
        ::close(3);
    }
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
}
