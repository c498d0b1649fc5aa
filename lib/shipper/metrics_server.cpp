#include "shipper/metrics_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "common/fs.hpp"
#include "common/time.hpp"

namespace jobtrail::shipper {

namespace {

struct Connection {
    Fd fd;
    int64_t accepted_ns = 0;
    std::string in;     // the request, until its headers end
    std::string out;    // the answer, once the request is read
    size_t sent = 0;    // of out
    bool done = false;  // answered in full, or broken: closed
};

// The answer to a request (its headers read, or all the client sent).
std::string answer(const std::string& request, const MetricsServer::Render& render) {
    const std::string_view path = "GET /metrics";
    const bool metrics = request.rfind(path, 0) == 0 && request.size() > path.size() &&
                         (request[path.size()] == ' ' || request[path.size()] == '?');
    if (!metrics) return "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    const std::string body = render();
    return "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

// Reads what the client sent, answers once its request is whole, writes what the socket takes.
void step(Connection& c, short revents, const MetricsServer::Render& render) {
    if (c.out.empty() && (revents & (POLLIN | POLLHUP | POLLERR))) {
        char buf[2048];
        const ssize_t n = ::read(c.fd.get(), buf, sizeof buf);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (n < 0 || (n == 0 && c.in.empty())) {
            c.done = true;
            return;
        }
        c.in.append(buf, static_cast<size_t>(n));
        if (n > 0 && c.in.find("\r\n\r\n") == std::string::npos && c.in.size() < MetricsServer::kMaxRequestBytes)
            return;
        c.out = answer(c.in, render);
    }
    if (!c.out.empty()) {
        const ssize_t n = ::send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (n < 0 || (c.sent += static_cast<size_t>(n)) == c.out.size()) c.done = true;
    }
}

}  // namespace

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
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    const int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 64) != 0) {
        Status st = Status::failure("cannot listen on " + listen + ": " + errno_text(errno));
        ::close(fd_);
        fd_ = -1;
        return st;
    }
    launch(std::move(render));
    return {};
}

void MetricsServer::start(Fd listening, Render render) {
    fd_ = listening.release();
    launch(std::move(render));
}

void MetricsServer::launch(Render render) {
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    stop_ = false;
    thread_ = std::thread([this, render = std::move(render)] { serve(render); });
}

void MetricsServer::serve(const Render& render) {
    std::vector<Connection> conns;
    std::vector<pollfd> fds;
    constexpr int64_t kTimeoutNs = kConnectionTimeoutMs * 1'000'000, kGraceNs = kGraceMs * 1'000'000;
    int64_t paused_until = 0;  // the listener is not polled before (after a failure)
    while (!stop_) {
        int64_t now = monotonic_ns();
        // Held full, a connection is closed for a new one once it has had its grace: a scrape asks
        // within milliseconds, so a flood of new connections cannot push it out before it has.
        // Until one has, new ones wait in the kernel's queue.
        const auto oldest = std::min_element(
            conns.begin(), conns.end(), [](const auto& a, const auto& b) { return a.accepted_ns < b.accepted_ns; });
        const bool full = conns.size() >= kMaxConnections;
        const bool can_take = (!full || now - oldest->accepted_ns >= kGraceNs) && now >= paused_until;
        fds.assign(1, pollfd{fd_, static_cast<short>(can_take ? POLLIN : 0), 0});
        int64_t wait_ns = 200'000'000;  // how soon a stop() is seen
        for (const auto& c : conns) {
            fds.push_back({c.fd.get(), static_cast<short>(c.out.empty() ? POLLIN : POLLOUT), 0});
            wait_ns = std::min(wait_ns, c.accepted_ns + kTimeoutNs - now);
        }
        if (full && now - oldest->accepted_ns < kGraceNs)
            wait_ns = std::min(wait_ns, oldest->accepted_ns + kGraceNs - now);
        if (now < paused_until) wait_ns = std::min(wait_ns, paused_until - now);
        const int timeout_ms = static_cast<int>(std::max<int64_t>(0, wait_ns) / 1'000'000 + 1);
        if (::poll(fds.data(), fds.size(), timeout_ms) < 0) {
            // Never given up on: the port stays bound, so the endpoint must keep answering.
            if (errno != EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(kFailurePauseMs));
            continue;
        }
        for (size_t i = 0; i < conns.size(); ++i)
            if (fds[i + 1].revents) step(conns[i], fds[i + 1].revents, render);
        now = monotonic_ns();
        std::erase_if(conns, [now](const Connection& c) { return c.done || now - c.accepted_ns >= kTimeoutNs; });
        if (!(fds[0].revents & POLLIN)) continue;
        bool freed = false;  // a held connection closed for a descriptor not yet taken
        const auto queued = [this] {
            pollfd p{fd_, POLLIN, 0};
            return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
        };
        while (true) {
            const auto first = std::min_element(
                conns.begin(), conns.end(), [](const auto& a, const auto& b) { return a.accepted_ns < b.accepted_ns; });
            if (conns.size() >= kMaxConnections && now - first->accepted_ns < kGraceNs) break;
            const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
            const int err = errno;
            // accept() takes the descriptor before it looks at the queue: at the limit it fails
            // even with nothing queued, so a connection is closed only for one that waits.
            if (fd < 0 && (err == EMFILE || err == ENFILE) && !freed && !conns.empty() &&
                now - first->accepted_ns >= kGraceNs && queued()) {
                // At the descriptor limit, the oldest connection past its grace gives its descriptor
                // to the new one, as when full: else held idle ones would keep a scrape out until
                // their deadline.
                conns.erase(first);
                freed = true;
                continue;
            }
            if (fd < 0) {
                // Out of descriptors or memory: the connection stays queued and the listener
                // readable; left alone a while, not polled in a spin.
                if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR && err != ECONNABORTED)
                    paused_until = monotonic_ns() + kFailurePauseMs * 1'000'000;
                break;
            }
            freed = false;  // each descriptor given up is taken by one new connection
            // Room is made once a connection is taken: none is closed for one that is not there.
            if (conns.size() >= kMaxConnections) conns.erase(first);
            Connection c{Fd(fd), monotonic_ns(), {}, {}, 0, false};
            step(c, POLLIN, render);  // a request already there is answered at once
            if (!c.done) conns.push_back(std::move(c));
        }
    }
}

void MetricsServer::stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

}  // namespace jobtrail::shipper
