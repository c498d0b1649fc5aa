#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "common/fs.hpp"
#include "common/result.hpp"

namespace jobtrail::shipper {

// Serves GET /metrics (Prometheus text) on a loopback address. Connections are served together
// from one poll loop, each with a deadline and at most kMaxConnections held: a local user's idle
// or slow connections are closed (the oldest first when too many or when the process is out of
// descriptors, once it has had kGraceMs to ask), never waited on, so they cannot make a scrape
// time out.
class MetricsServer {
public:
    using Render = std::function<std::string()>;
    // A scrape's request and answer are a few kilobytes on loopback: milliseconds.
    static constexpr int64_t kConnectionTimeoutMs = 2000;
    static constexpr size_t kMaxConnections = 32;
    // How long a held connection is kept from being closed for a newer one.
    static constexpr int64_t kGraceMs = 100;
    static constexpr size_t kMaxRequestBytes = 4096;

    ~MetricsServer();
    // After an accept or poll failure (EMFILE, ENOMEM...) the listener is left alone this long:
    // its queue stays readable, and polling it at once would spin a core.
    static constexpr int64_t kFailurePauseMs = 100;

    // listen: "127.0.0.1:9480"; fails if it cannot bind (the error names the address).
    Status start(const std::string& listen, Render render);
    // Serves on a socket already listening (one systemd passed, see listen_fds.hpp).
    void start(Fd listening, Render render);
    void stop();
    bool running() const { return fd_ >= 0; }
    int port() const { return port_; }

private:
    void launch(Render render);
    void serve(const Render& render);

    int fd_ = -1;
    int port_ = 0;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace jobtrail::shipper
