#include "shipper/listen_fds.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

namespace jobtrail::shipper {

namespace {

constexpr int kFirstFd = 3;  // SD_LISTEN_FDS_START

// A whole decimal number, or -1.
long parse_count(const char* s) {
    if (!s || !*s) return -1;
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(s, &end, 10);
    return (errno || *end || v < 0) ? -1 : v;
}

}  // namespace

Result<Fd> take_listen_socket() {
    const char* pid = std::getenv("LISTEN_PID");
    const char* fds = std::getenv("LISTEN_FDS");
    if (!pid && !fds) return Fd{};
    const long for_pid = parse_count(pid), count = parse_count(fds);
    ::unsetenv("LISTEN_PID");
    ::unsetenv("LISTEN_FDS");
    ::unsetenv("LISTEN_FDNAMES");
    // Passed to another process (a parent that did not unset them): not ours to take.
    if (for_pid != static_cast<long>(::getpid()) || count <= 0) return Fd{};
    for (int fd = kFirstFd + 1; fd < kFirstFd + count; ++fd) ::close(fd);
    Fd sock(kFirstFd);
    int type = 0, listening = 0;
    socklen_t len = sizeof type;
    if (::getsockopt(sock.get(), SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM ||
        (len = sizeof listening, ::getsockopt(sock.get(), SOL_SOCKET, SO_ACCEPTCONN, &listening, &len)) != 0 ||
        !listening)
        return Status::failure(
            "LISTEN_FDS: fd 3 from systemd is not a listening stream socket (ListenStream= in "
            "jobtrail-shipper.socket)");
    // The server accepts until the queue is empty: a blocking socket would hang it there.
    if (::fcntl(sock.get(), F_SETFD, FD_CLOEXEC) != 0 ||
        ::fcntl(sock.get(), F_SETFL, ::fcntl(sock.get(), F_GETFL) | O_NONBLOCK) != 0)
        return Status::failure("LISTEN_FDS: fd 3: " + errno_text(errno));
    return sock;
}

}  // namespace jobtrail::shipper
