#include "shipper/listen_fds.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
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

namespace {

// `fd` moved to 20 or above, out of the way of the fds the test puts in place.
int high(int fd) {
    const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 20);
    REQUIRE(moved >= 0);
    ::close(fd);
    return moved;
}

// A TCP socket on 127.0.0.1 (a port the kernel picks), listening or not, of `type`.
int tcp_socket(int type, bool listening, unsigned* port = nullptr) {
    const int s = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
    REQUIRE(s >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    if (listening) REQUIRE(::listen(s, 4) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    if (port) *port = ntohs(a.sin_port);
    return high(s);
}

// Puts `fd` at `at` for the test, and what was there back at the end.
struct FdAt {
    int at, saved;
    FdAt(int where, int fd) : at(where), saved(::fcntl(where, F_DUPFD_CLOEXEC, 10)) {
        REQUIRE(::dup2(fd, at) == at);
        ::close(fd);
    }
    ~FdAt() {
        if (saved >= 0) {
            ::dup2(saved, at);
            ::close(saved);
        } else {
            ::close(at);
        }
    }
};

void activate(const char* count) {
    ::setenv("LISTEN_PID", std::to_string(::getpid()).c_str(), 1);
    ::setenv("LISTEN_FDS", count, 1);
    ::setenv("LISTEN_FDNAMES", "metrics", 1);
}

}  // namespace

TEST_CASE("socket activation: systemd's listening socket at fd 3 is taken non-blocking and closed on exec",
          "[metrics][listen]") {
    unsigned port = 0;
    FdAt three(3, tcp_socket(SOCK_STREAM, true, &port));
    int pipe_fds[2];
    REQUIRE(::pipe(pipe_fds) == 0);
    ::close(pipe_fds[1]);
    FdAt four(4, high(pipe_fds[0]));  // a second socket the unit passed: not ours, closed
    REQUIRE(::pipe(pipe_fds) == 0);
    ::close(pipe_fds[1]);
    FdAt five(5, high(pipe_fds[0]));  // past the ones passed: the shipper's own, kept
    activate("2");
    Result<Fd> r = shipper::take_listen_socket();
    REQUIRE(r.ok);
    CHECK(r.value.get() == 3);
    CHECK((::fcntl(3, F_GETFL) & O_NONBLOCK) != 0);  // accepting until the queue is empty never hangs
    CHECK((::fcntl(3, F_GETFD) & FD_CLOEXEC) != 0);  // scripts the shipper starts do not hold the port
    CHECK(::fcntl(4, F_GETFD) == -1);
    CHECK(::fcntl(5, F_GETFD) != -1);
    CHECK(std::getenv("LISTEN_PID") == nullptr);
    CHECK(std::getenv("LISTEN_FDS") == nullptr);
    CHECK(std::getenv("LISTEN_FDNAMES") == nullptr);
    // It is the socket systemd listens on: a scraper's connection is there to accept, and none
    // more after it (EAGAIN, not a hang).
    const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    REQUIRE(::connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    pollfd ready{r.value.get(), POLLIN, 0};
    REQUIRE(::poll(&ready, 1, 10'000) == 1);  // the handshake done, on a loaded machine too
    const int conn = ::accept(r.value.get(), nullptr, nullptr);
    CHECK(conn >= 0);
    const int again = ::accept(r.value.get(), nullptr, nullptr);
    const int err = errno;
    CHECK(again == -1);
    CHECK(err == EAGAIN);
    ::close(conn);
    ::close(client);
    (void)r.value.release();  // FdAt puts fd 3 back
}

TEST_CASE("socket activation: an fd 3 that is not a listening stream socket is refused and says where to look",
          "[metrics][listen]") {
    int pipe_fds[2];
    REQUIRE(::pipe(pipe_fds) == 0);
    ::close(pipe_fds[1]);
    for (const int fd : {high(pipe_fds[0]), tcp_socket(SOCK_STREAM, false), tcp_socket(SOCK_DGRAM, false)}) {
        FdAt three(3, fd);
        activate("1");
        const Result<Fd> r = shipper::take_listen_socket();
        CHECK_FALSE(r.ok);
        CHECK(r.error ==
              "LISTEN_FDS: fd 3 from systemd is not a listening stream socket (ListenStream= in "
              "jobtrail-shipper.socket)");
    }
}
