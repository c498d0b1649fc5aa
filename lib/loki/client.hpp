#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "config/shipper_config.hpp"

namespace jobtrail::loki {

// Where and how to reach Loki. Secrets are read from files and never printed.
struct Endpoint {
    std::string url = "http://127.0.0.1:3100";  // base URL; /loki/api/v1/... is appended
    std::string tenant;                         // X-Scope-OrgID, empty for none
    std::string basic_user;
    std::string basic_password_file;
    std::string bearer_token_file;
    std::string ca_file;
    std::string cert_file;
    std::string key_file;
    bool tls_verify = true;
    int64_t timeout_ms = 10'000;
    int64_t connect_timeout_ms = 5'000;
    // What one response may buffer: a proxy or a compromised Loki must not exhaust our memory.
    size_t max_response_bytes = size_t{64} << 20;      // queries
    size_t max_push_response_bytes = size_t{1} << 20;  // pushes answer 204 or a short error
};

// shipper.loki in /etc/jobtrail/jobtrail.yaml, for the shipper and the CLI alike.
Endpoint endpoint_from_config(const config::ShipperConfig& c);

struct HttpResult {
    long status = 0;  // 0 when no answer came
    std::string body;
    std::string error;       // transport error (connection refused, timeout, TLS), empty otherwise
    bool too_large = false;  // the response passed the endpoint's cap (error says so); not retried
};

// "Post this push, get status and body": the sender's only need of HTTP, so a test can script
// Loki's answers without a server.
class PushTransport {
public:
    virtual ~PushTransport() = default;
    virtual HttpResult push(std::string_view snappy_protobuf) = 0;
};

// One keep-alive connection to Loki (libcurl easy handle). Not thread-safe: one per thread.
class Client : public PushTransport {
public:
    explicit Client(Endpoint ep);
    ~Client() override;
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    // POST /loki/api/v1/push with a snappy protobuf body.
    HttpResult push(std::string_view snappy_protobuf) override;
    // GET path?query (path like "/loki/api/v1/query_range"; query already URL-encoded).
    HttpResult get(std::string_view path, std::string_view query);

    // For log lines: the URL without credentials.
    std::string describe() const;
    // Reads the secret files; false (and err) if one is configured but unreadable.
    bool load_secrets(std::string& err);

    static std::string url_encode(std::string_view s);

private:
    HttpResult perform(const std::string& url, const std::string* body, size_t max_bytes);
    Endpoint ep_;
    std::string password_;
    std::string token_;
    void* curl_;  // CURL*
};

}  // namespace jobtrail::loki
