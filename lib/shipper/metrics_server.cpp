#include "shipper/metrics_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "common/fs.hpp"

namespace jobtrail::shipper {

MetricsServer::~MetricsServer() {
    stop();
}

Status MetricsServer::start(const std::string& listen, Render render) {
    const size_t colon = listen.rfind(':');
    if (colon == std::string::npos) {
        return Status::failure("metrics address '" + listen + "' is not host:port");
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(std::atoi(listen.c_str() + colon + 1)));
    if (::inet_pton(AF_INET, listen.substr(0, colon).c_str(), &addr.sin_addr) != 1) {
        return Status::failure("metrics address '" + listen + "' is not an IPv4 host:port");
    }
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 8) != 0) {
        Status st = Status::failure("cannot listen on " + listen + ": " + errno_text(errno));
        ::close(fd_);
        fd_ = -1;
        return st;
    }
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, render = std::move(render)] {
        while (!stop_) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 200) <= 0) continue;
            const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (c < 0) continue;
            timeval tv{2, 0};
            ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            char buf[2048];
            const ssize_t n = ::read(c, buf, sizeof buf - 1);
            std::string reply;
            if (n > 0 && std::strncmp(buf, "GET /metrics", 12) == 0) {
                const std::string body = render();
                reply = "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
            } else {
                reply = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
            }
            write_all(c, reply);
            ::close(c);
        }
    });
    return {};
}

void MetricsServer::stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

}  // namespace jobtrail::shipper
