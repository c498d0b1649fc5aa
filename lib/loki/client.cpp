#include "loki/client.hpp"

#include <curl/curl.h>

#include <mutex>

#include "common/fs.hpp"
#include "common/text.hpp"

namespace jobtrail::loki {
namespace {

struct Sink {
    std::string* body;
    size_t max;
    bool over = false;
};

size_t collect(char* data, size_t size, size_t n, void* user) {
    auto* s = static_cast<Sink*>(user);
    if (s->body->size() + size * n > s->max) {
        s->over = true;
        return 0;  // libcurl stops the transfer (CURLE_WRITE_ERROR)
    }
    s->body->append(data, size * n);
    return size * n;
}

void global_init() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

Client::Client(Endpoint ep) : ep_(std::move(ep)) {
    global_init();
    curl_ = curl_easy_init();
    while (!ep_.url.empty() && ep_.url.back() == '/') ep_.url.pop_back();
}

Client::~Client() {
    curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Status Client::load_secrets() {
    for (auto [path, out] : {std::pair{&ep_.basic_password_file, &password_}, {&ep_.bearer_token_file, &token_}}) {
        if (path->empty()) continue;
        auto s = read_small_file(*path, size_t{64} * 1024);
        if (!s) return Status::failure("cannot read secret file " + *path);
        *out = std::string(trim(*s));
    }
    return Status::success();
}

std::string Client::describe() const {
    // A URL may carry user:password@: never in logs, metrics or bundles.
    return redact_url_credentials(ep_.url) + (ep_.tenant.empty() ? "" : " (tenant " + ep_.tenant + ")");
}

std::string Client::url_encode(std::string_view s) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : s) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

HttpResult Client::push(std::string_view body) {
    const std::string b(body);
    return perform(ep_.url + "/loki/api/v1/push", &b, ep_.max_push_response_bytes);
}

HttpResult Client::get(std::string_view path, std::string_view query) {
    return perform(ep_.url + std::string(path) + (query.empty() ? "" : "?" + std::string(query)), nullptr,
                   ep_.max_response_bytes);
}

HttpResult Client::perform(const std::string& url, const std::string* body, size_t max_bytes) {
    HttpResult res;
    auto* c = static_cast<CURL*>(curl_);
    if (!c) {
        res.error = "libcurl could not be initialised";
        return res;
    }
    curl_easy_reset(c);  // keeps the connection cache: keep-alive survives
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(ep_.timeout_ms));
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(ep_.connect_timeout_ms));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    Sink sink{&res.body, max_bytes};
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
    // A Content-Length over the cap is refused before the body comes.
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(max_bytes));
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, ep_.tls_verify ? 1L : 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, ep_.tls_verify ? 2L : 0L);
    if (!ep_.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, ep_.ca_file.c_str());
    if (!ep_.cert_file.empty()) curl_easy_setopt(c, CURLOPT_SSLCERT, ep_.cert_file.c_str());
    if (!ep_.key_file.empty()) curl_easy_setopt(c, CURLOPT_SSLKEY, ep_.key_file.c_str());
    if (!ep_.basic_user.empty()) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
        curl_easy_setopt(c, CURLOPT_USERNAME, ep_.basic_user.c_str());
        curl_easy_setopt(c, CURLOPT_PASSWORD, password_.c_str());
    }
    curl_slist* headers = nullptr;
    if (!ep_.tenant.empty()) headers = curl_slist_append(headers, ("X-Scope-OrgID: " + ep_.tenant).c_str());
    if (!token_.empty()) headers = curl_slist_append(headers, ("Authorization: Bearer " + token_).c_str());
    if (body) {
        headers = curl_slist_append(headers, "Content-Type: application/x-protobuf");
        headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->data());
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
    }
    if (headers) curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    const CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &res.status);
    } else if (sink.over || rc == CURLE_FILESIZE_EXCEEDED) {
        res.too_large = true;
        res.error = "response from " + redact_url_credentials(url.substr(0, url.find('?'))) + " larger than " +
                    std::to_string(max_bytes) + " bytes";
        res.body.clear();
    } else {
        res.error = curl_easy_strerror(rc);
        res.body.clear();
    }
    curl_slist_free_all(headers);
    return res;
}

}  // namespace jobtrail::loki
