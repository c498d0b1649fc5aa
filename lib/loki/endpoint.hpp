#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace jobtrail::loki {

// Where and how to reach Loki. Secrets are read from files and never printed. The caller builds
// it (config::loki_endpoint): this library does not know the application's configuration.
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

}  // namespace jobtrail::loki
