#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "common/result.hpp"

namespace jobtrail::shipper {

// Serves GET /metrics (Prometheus text) on a loopback address. One request at a time: a scrape
// every few seconds is all it is for.
class MetricsServer {
public:
    using Render = std::function<std::string()>;
    ~MetricsServer();
    // listen: "127.0.0.1:9480"; fails if it cannot bind.
    Status start(const std::string& listen, Render render);
    void stop();
    int port() const { return port_; }

private:
    int fd_ = -1;
    int port_ = 0;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace jobtrail::shipper
