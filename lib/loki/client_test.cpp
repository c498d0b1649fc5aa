#include "loki/client.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "temp_dir.hpp"

using namespace jobtrail::loki;

namespace {

// A server on a loopback port that keeps every request as it came (request line, headers and
// body) and answers each with `status`, or not at all: what a Loki or a proxy would see of us.
class RecordingServer {
public:
    explicit RecordingServer(int status, bool answer = true) : status_(status), answer_(answer) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        REQUIRE(fd_ >= 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(::listen(fd_, 8) == 0);
        socklen_t len = sizeof a;
        REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
        url_ = "http://127.0.0.1:" + std::to_string(ntohs(a.sin_port));
        thread_ = std::thread([this] { serve(); });
    }
    ~RecordingServer() {
        ::shutdown(fd_, SHUT_RDWR);
        thread_.join();
        ::close(fd_);
    }
    const std::string& url() const { return url_; }
    std::vector<std::string> requests() {
        std::lock_guard<std::mutex> lk(mu_);
        return requests_;
    }

private:
    void serve() {
        for (;;) {
            const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (c < 0) return;
            std::string req;
            char buf[65536];
            size_t want = std::string::npos;
            while (req.size() < want) {
                const ssize_t n = ::read(c, buf, sizeof buf);
                if (n <= 0) break;
                req.append(buf, static_cast<size_t>(n));
                if (want != std::string::npos) continue;
                const size_t end = req.find("\r\n\r\n");
                if (end != std::string::npos) {
                    const size_t cl = req.find("Content-Length: ");
                    want = end + 4 + (cl != std::string::npos && cl < end ? std::stoul(req.substr(cl + 16)) : 0);
                }
            }
            {
                std::lock_guard<std::mutex> lk(mu_);
                requests_.push_back(req);
            }
            if (answer_) {
                const std::string reply =
                    "HTTP/1.1 " + std::to_string(status_) + " X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
                (void)!::write(c, reply.data(), reply.size());
            } else {
                while (::read(c, buf, sizeof buf) > 0) {
                }  // until the client gives up
            }
            ::close(c);
        }
    }

    int status_;
    bool answer_;
    int fd_ = -1;
    std::string url_;
    std::thread thread_;
    std::mutex mu_;
    std::vector<std::string> requests_;
};

bool has(const std::string& s, const std::string& what) {
    return s.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("a push is a protobuf POST to the push path with the tenant and every byte of the body", "[loki]") {
    RecordingServer server(200);
    Endpoint ep;
    ep.url = server.url() + "//";  // trailing slashes in the configured URL are not doubled in the path
    ep.tenant = "team-a";
    Client c(ep);
    // Over a megabyte, where libcurl would otherwise ask "Expect: 100-continue" and wait.
    const std::string body = std::string("\x00\x01 snappy bytes \xff", 17) + std::string(2 << 20, 'b');
    const HttpResult r = c.push(body);
    CHECK(r.status == 200);
    CHECK(r.body == "ok");
    CHECK(r.error.empty());
    const auto reqs = server.requests();
    REQUIRE(reqs.size() == 1);
    const std::string& q = reqs[0];
    CHECK(q.rfind("POST /loki/api/v1/push HTTP/1.1\r\n", 0) == 0);
    CHECK(has(q, "\r\nX-Scope-OrgID: team-a\r\n"));
    CHECK(has(q, "\r\nContent-Type: application/x-protobuf\r\n"));
    CHECK(has(q, "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n"));
    CHECK_FALSE(has(q, "Expect:"));  // no 100-continue round trip
    CHECK_FALSE(has(q, "Authorization:"));
    CHECK(q.substr(q.find("\r\n\r\n") + 4) == body);
}

TEST_CASE("a query is a GET with its parameters, and without a tenant no X-Scope-OrgID", "[loki]") {
    RecordingServer server(200);
    Endpoint ep;
    ep.url = server.url();
    Client c(ep);
    CHECK(c.get("/loki/api/v1/query_range", "query=" + Client::url_encode("{job=\"t\"}") + "&limit=5").status == 200);
    CHECK(c.get("/loki/api/v1/labels", "").status == 200);
    const auto reqs = server.requests();
    REQUIRE(reqs.size() == 2);
    CHECK(reqs[0].rfind("GET /loki/api/v1/query_range?query=%7Bjob%3D%22t%22%7D&limit=5 HTTP/1.1\r\n", 0) == 0);
    CHECK(reqs[1].rfind("GET /loki/api/v1/labels HTTP/1.1\r\n", 0) == 0);
    for (const auto& q : reqs) {
        CHECK_FALSE(has(q, "X-Scope-OrgID"));
        CHECK_FALSE(has(q, "Content-Type"));
    }
}

TEST_CASE("basic auth and a bearer token are read from their files, trimmed, and sent", "[loki]") {
    jobtrail::test::TempDir dir;
    std::ofstream(dir.path() + "/password") << "s3cret\n";
    std::ofstream(dir.path() + "/token") << "  tok-123\n";
    RecordingServer server(204);
    {
        Endpoint ep;
        ep.url = server.url();
        ep.basic_user = "ops";
        ep.basic_password_file = dir.path() + "/password";
        Client c(ep);
        REQUIRE(c.load_secrets().ok);
        CHECK(c.push("x").status == 204);
    }
    {
        Endpoint ep;
        ep.url = server.url();
        ep.bearer_token_file = dir.path() + "/token";
        Client c(ep);
        REQUIRE(c.load_secrets().ok);
        CHECK(c.get("/ready", "").status == 204);
    }
    const auto reqs = server.requests();
    REQUIRE(reqs.size() == 2);
    CHECK(has(reqs[0], "\r\nAuthorization: Basic b3BzOnMzY3JldA==\r\n"));  // ops:s3cret
    CHECK(has(reqs[1], "\r\nAuthorization: Bearer tok-123\r\n"));
}

TEST_CASE("a secret file that cannot be read is an error naming it, and no file is no secret", "[loki]") {
    jobtrail::test::TempDir dir;
    Endpoint ep;
    ep.basic_user = "ops";
    ep.basic_password_file = dir.path() + "/missing";
    Client c(ep);
    const auto st = c.load_secrets();
    CHECK_FALSE(st.ok);
    CHECK(st.error == "cannot read secret file " + dir.path() + "/missing");
    Endpoint token;
    token.bearer_token_file = dir.path() + "/missing-token";
    Client t(token);
    CHECK(t.load_secrets().error == "cannot read secret file " + dir.path() + "/missing-token");
    Client none{Endpoint{}};
    CHECK(none.load_secrets().ok);
}

TEST_CASE("a server that never answers fails the request at the timeout, with the transport's error", "[loki]") {
    RecordingServer server(204, false);
    Endpoint ep;
    ep.url = server.url();
    ep.timeout_ms = 300;
    Client c(ep);
    const HttpResult r = c.push("x");
    CHECK(r.status == 0);
    CHECK_FALSE(r.too_large);
    CHECK(r.error.find("imeout") != std::string::npos);  // libcurl's "Timeout was reached"
}

TEST_CASE("the endpoint described without its credentials, with its tenant", "[loki]") {
    Endpoint ep;
    ep.url = "https://ops:s3cret@loki:3100/";
    CHECK(Client(ep).describe() == "https://<redacted>@loki:3100");
    ep.tenant = "t1";
    CHECK(Client(ep).describe() == "https://<redacted>@loki:3100 (tenant t1)");
}

TEST_CASE("url_encode keeps unreserved characters and percent-encodes every other byte", "[loki]") {
    CHECK(Client::url_encode("aZ09-_.~") == "aZ09-_.~");
    CHECK(Client::url_encode("{job=\"t\"} |= \"x/y\"") == "%7Bjob%3D%22t%22%7D%20%7C%3D%20%22x%2Fy%22");
    CHECK(Client::url_encode("\xc3\xa9\x01") == "%C3%A9%01");
}
