#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/result.hpp"
#include "loki/endpoint.hpp"

namespace jobtrail::loki {

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
    Status load_secrets();

    static std::string url_encode(std::string_view s);

private:
    HttpResult perform(const std::string& url, const std::string* body, size_t max_bytes);
    Endpoint ep_;
    std::string password_;
    std::string token_;
    void* curl_;  // CURL*
};

}  // namespace jobtrail::loki
