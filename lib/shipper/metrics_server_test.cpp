#include "shipper/metrics_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>
#include <vector>

#include "common/time.hpp"
#include "shipper/lane_metrics.hpp"
#include "shipper/pipeline_metrics.hpp"
#include "shipper/sender/metrics.hpp"
#include "shipper/sources/registry.hpp"

using namespace jobtrail::shipper;

namespace {

sockaddr_in loopback(int port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return addr;
}

// A connection that sends nothing (connecting without waiting: a server that does not accept
// must not hold up the test).
int idle_connection(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    REQUIRE(fd >= 0);
    const sockaddr_in addr = loopback(port);
    ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    return fd;
}

// One plain HTTP request to 127.0.0.1:port, the whole answer back (what came within timeout_s).
std::string http(int port, const std::string& request, int timeout_s = 60) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    const timeval tv{timeout_s, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);  // connect() too
    const sockaddr_in addr = loopback(port);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        return "";
    }
    REQUIRE(::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return out;
}

// This process's CPU seconds so far, all threads: with the test's own thread asleep, the server's.
double cpu_seconds() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    const auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
    return secs(u.ru_utime) + secs(u.ru_stime);
}

// From its making until its end no descriptor is free below the limit (RLIMIT_NOFILE lowered to
// the lowest free one): the server's accept fails with EMFILE. The limit is put back however the
// test ends.
class NoDescriptorFree {
public:
    NoDescriptorFree() {
        const int lowest_free = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        REQUIRE(lowest_free >= 0);
        ::close(lowest_free);
        REQUIRE(::getrlimit(RLIMIT_NOFILE, &old_) == 0);
        rlimit low = old_;
        low.rlim_cur = static_cast<rlim_t>(lowest_free);
        REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
    }
    ~NoDescriptorFree() { ::setrlimit(RLIMIT_NOFILE, &old_); }
    NoDescriptorFree(const NoDescriptorFree&) = delete;
    NoDescriptorFree& operator=(const NoDescriptorFree&) = delete;

private:
    rlimit old_{};
};

}  // namespace

TEST_CASE("metrics: the counters an operator greps for, in Prometheus' text format", "[shipper]") {
    Metrics m;
    auto& sender = m.group<SenderMetrics>();
    sender.sent += 42;
    sender.retries += 3;
    sender.last_success = 1'795'989'142'500'000'000;
    m.group<Drops>()("too_old", 5);
    sender.rejected.add({"line_too_long"}, 2);
    m.group<PipelineMetrics>().events.add({"sender", "rejected"});
    m.group<LaneMetrics>().sample({1000, 234}, jobtrail::realtime_ns());
    declare_source_metrics(m);
    const std::string text = m.render();
    CHECK(text.find("\njobtrail_shipper_records_sent_total 42\n") != std::string::npos);
    CHECK(text.find("\njobtrail_shipper_retries_total 3\n") != std::string::npos);
    CHECK(text.find("\njobtrail_shipper_spool_bytes 1234\n") != std::string::npos);
    CHECK(text.find("\njobtrail_shipper_last_success_timestamp_seconds 1795989142\n") != std::string::npos);
    CHECK(text.find("\njobtrail_shipper_dropped_total{reason=\"too_old\"} 5\n") != std::string::npos);
    CHECK(text.find("\njobtrail_shipper_rejected_total{reason=\"line_too_long\"} 2\n") != std::string::npos);
    CHECK(text.find("jobtrail_shipper_internal_events_total{component=\"sender\",event=\"rejected\"} 1\n") !=
          std::string::npos);
    // A source kind's counters are there before any source of it runs.
    CHECK(text.find("\njobtrail_shipper_kmsg_lost_total 0\n") != std::string::npos);
    CHECK(text.find("\njobtrail_shipper_cri_lines_cut_total 0\n") != std::string::npos);
    // Every sample belongs to a metric whose TYPE was given before it, and has a number.
    std::set<std::string> typed;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        INFO(line);
        if (line.rfind("# TYPE ", 0) == 0) {
            typed.insert(line.substr(7, line.find(' ', 7) - 7));
            continue;
        }
        if (line.rfind("# HELP ", 0) == 0) continue;
        const std::string name = line.substr(0, line.find_first_of("{ "));
        CHECK(typed.count(name) == 1);
        const std::string value = line.substr(line.rfind(' ') + 1);
        CHECK_FALSE(value.empty());
        CHECK(value.find_first_not_of("0123456789") == std::string::npos);
    }
}

TEST_CASE("metrics server: GET /metrics answers the render, anything else 404, bad addresses refused", "[shipper]") {
    MetricsServer s;
    REQUIRE(s.start("127.0.0.1:0", [] { return std::string("jobtrail_up 1\n"); }).ok);
    REQUIRE(s.port() > 0);
    const std::string ok = http(s.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(ok.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
    CHECK(ok.find("Content-Length: 14\r\n") != std::string::npos);
    CHECK(ok.substr(ok.size() - 14) == "jobtrail_up 1\n");
    CHECK(http(s.port(), "GET / HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404 Not Found\r\n", 0) == 0);
    CHECK(http(s.port(), "POST /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404", 0) == 0);

    MetricsServer same;
    auto st = same.start("127.0.0.1:" + std::to_string(s.port()), [] { return std::string(); });
    CHECK_FALSE(st.ok);
    CHECK(st.error.find("cannot listen on 127.0.0.1:") == 0);
    MetricsServer bad;
    st = bad.start("localhost:9480", [] { return std::string(); });
    CHECK_FALSE(st.ok);
    CHECK(st.error.find("not an IPv4 host:port") != std::string::npos);
    st = bad.start("9480", [] { return std::string(); });
    CHECK_FALSE(st.ok);
    CHECK(st.error.find("not host:port") != std::string::npos);
    s.stop();
}

TEST_CASE("metrics server: connections a local user holds open do not hold up a scrape", "[shipper]") {
    MetricsServer s;
    REQUIRE(s.start("127.0.0.1:0", [] { return std::string("jobtrail_up 1\n"); }).ok);
    std::vector<int> held;
    for (int i = 0; i < 20; ++i) held.push_back(idle_connection(s.port()));
    // Half a request, never finished.
    const int slow = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_in addr = loopback(s.port());
    REQUIRE(::connect(slow, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::write(slow, "GET /metr", 9) == 9);
    // Served one at a time, 2 s each, they made a scrape wait 42 s; 5 s is a scraper's patience.
    CHECK(http(s.port(), "GET /metrics HTTP/1.1\r\n\r\n", 5).rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
    // More than it holds: the oldest are closed, and a scrape is still answered.
    for (int i = 0; i < 100; ++i) held.push_back(idle_connection(s.port()));
    CHECK(http(s.port(), "GET /metrics HTTP/1.1\r\n\r\n", 5).rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
    // The unfinished request is closed unanswered, within its bound (the read waits up to 10 s).
    const timeval tv{10, 0};
    ::setsockopt(slow, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char c;
    CHECK(::read(slow, &c, 1) == 0);
    ::close(slow);
    for (const int fd : held) ::close(fd);
}

TEST_CASE("metrics server: out of descriptors, it neither spins nor stops serving", "[shipper]") {
    MetricsServer s;
    REQUIRE(s.start("127.0.0.1:0", [] { return std::string("jobtrail_up 1\n"); }).ok);
    // A client socket first; then no descriptor free below the limit: the server's accept fails
    // (EMFILE) while the connection waits in its queue and the listener stays readable.
    const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    REQUIRE(client >= 0);
    double cpu = 0;
    {
        const NoDescriptorFree none;
        const sockaddr_in addr = loopback(s.port());
        ::connect(client, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
        const double before = cpu_seconds();
        ::usleep(500'000);  // this thread sleeps: the process's CPU time is the server's
        cpu = cpu_seconds() - before;
    }
    INFO("server CPU seconds in 0.5 s without descriptors: " << cpu);
    CHECK(cpu < 0.25);  // a spin polling the readable listener takes the whole 0.5 s
    // Descriptors back: it serves again.
    CHECK(http(s.port(), "GET /metrics HTTP/1.0\r\n\r\n", 5).find("jobtrail_up 1") != std::string::npos);
    ::close(client);
}

TEST_CASE("metrics server: it holds exactly kMaxConnections idle connections, one more closes the oldest",
          "[shipper]") {
    MetricsServer s;
    REQUIRE(s.start("127.0.0.1:0", [] { return std::string("jobtrail_up 1\n"); }).ok);
    std::vector<int> held;
    for (size_t i = 0; i < MetricsServer::kMaxConnections; ++i) held.push_back(idle_connection(s.port()));
    // All accepted and past their grace (well within their 2 s deadline): none is closed.
    ::usleep(2 * MetricsServer::kGraceMs * 1000);
    const auto closed = [](int fd, int wait_ms) {
        pollfd p{fd, POLLIN, 0};
        char c;
        return ::poll(&p, 1, wait_ms) == 1 && ::read(fd, &c, 1) == 0;
    };
    for (const int fd : held) CHECK_FALSE(closed(fd, 0));
    // One more: the oldest is closed for it, the others are kept.
    held.push_back(idle_connection(s.port()));
    CHECK(closed(held.front(), 1000));
    ::usleep(50'000);
    for (size_t i = 1; i < held.size(); ++i) CHECK_FALSE(closed(held[i], 0));
    for (const int fd : held) ::close(fd);
}

TEST_CASE("metrics server: held full, connections queued behind its grace do not make it spin", "[shipper]") {
    MetricsServer s;
    REQUIRE(s.start("127.0.0.1:0", [] { return std::string("jobtrail_up 1\n"); }).ok);
    // kMaxConnections taken at once, 60 more in the kernel's queue (its backlog is 64): the
    // server lets them in as the graces end, 100 ms apart (six seconds' worth), and sleeps in
    // between.
    std::vector<int> held;
    for (size_t i = 0; i < MetricsServer::kMaxConnections + 60; ++i) held.push_back(idle_connection(s.port()));
    const double before = cpu_seconds();
    ::usleep(500'000);  // this thread sleeps: the process's CPU time is the server's
    const double cpu = cpu_seconds() - before;
    INFO("server CPU seconds in 0.5 s held full with connections queued: " << cpu);
    CHECK(cpu < 0.1);  // polling the readable listener while full spins through each grace
    CHECK(http(s.port(), "GET /metrics HTTP/1.0\r\n\r\n", 5).find("jobtrail_up 1") != std::string::npos);
    for (const int fd : held) ::close(fd);
}

TEST_CASE("metrics server: held full, a flood of new connections closes none before its grace", "[shipper]") {
    MetricsServer s;
    REQUIRE(s.start("127.0.0.1:0", [] { return std::string("jobtrail_up 1\n"); }).ok);
    std::vector<int> held;
    for (size_t i = 0; i < MetricsServer::kMaxConnections; ++i) held.push_back(idle_connection(s.port()));
    ::usleep(2 * MetricsServer::kGraceMs * 1000);  // all held, past their grace
    // Eight more than it holds at once: the first kMaxConnections new ones push the old ones out,
    // the last eight wait for a grace to end; none is closed sooner than kGraceMs after it came.
    std::vector<std::pair<int, int64_t>> flood;
    for (size_t i = 0; i < MetricsServer::kMaxConnections + 8; ++i) {
        const int64_t before = jobtrail::monotonic_ns();  // no later than the server's accept
        flood.emplace_back(idle_connection(s.port()), before);
    }
    size_t closed = 0;
    // Long enough for a loaded machine, short of the connections' own deadline (2 s).
    const int64_t until = jobtrail::monotonic_ns() + 10 * MetricsServer::kGraceMs * 1'000'000;
    while (jobtrail::monotonic_ns() < until) {
        std::vector<pollfd> fds;
        for (const auto& [fd, since] : flood) fds.push_back({fd, POLLIN, 0});
        if (::poll(fds.data(), fds.size(), 10) <= 0) continue;
        for (size_t i = 0; i < fds.size(); ++i) {
            char c;
            if (!fds[i].revents || flood[i].second == 0 || ::read(fds[i].fd, &c, 1) != 0) continue;
            INFO("connection " << i << " of the flood");
            CHECK(jobtrail::monotonic_ns() - flood[i].second >= MetricsServer::kGraceMs * 1'000'000);
            flood[i].second = 0;  // seen closed
            ++closed;
        }
    }
    CHECK(closed == 8);  // the first eight of the flood, for the last eight
    for (const int fd : held) ::close(fd);
    for (const auto& [fd, since] : flood) ::close(fd);
}

TEST_CASE(
    "metrics server: at the descriptor limit the oldest idle connection past its grace makes room for a "
    "scrape",
    "[shipper]") {
    MetricsServer s;
    REQUIRE(s.start("127.0.0.1:0", [] { return std::string("jobtrail_up 1\n"); }).ok);
    // Three idle connections a local user holds, all taken and past their grace (their 2 s
    // deadline far off).
    const auto open_fds = [] {
        size_t n = 0;
        for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
        return n;
    };
    const size_t before = open_fds();
    std::vector<int> held;
    for (int i = 0; i < 3; ++i) {
        held.push_back(idle_connection(s.port()));
        ::usleep(20'000);  // in order: the first is the oldest
    }
    // Taken by the server (its three ends open too), however slow its thread is to get there.
    for (int i = 0; i < 1000 && open_fds() < before + 6; ++i) ::usleep(10'000);
    REQUIRE(open_fds() == before + 6);
    ::usleep(2 * MetricsServer::kGraceMs * 1000);
    // A scrape's socket, then no descriptor free below the limit: the server's accept fails (EMFILE).
    const int scrape = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(scrape >= 0);
    auto none = std::make_unique<NoDescriptorFree>();
    const sockaddr_in addr = loopback(s.port());
    const bool connected = ::connect(scrape, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
    const std::string request = "GET /metrics HTTP/1.0\r\n\r\n";
    const bool sent =
        connected && ::write(scrape, request.data(), request.size()) == static_cast<ssize_t>(request.size());
    // The answer, waited for less than the held connections' deadline: it must not take their end.
    std::string answer;
    pollfd p{scrape, POLLIN, 0};
    char buf[4096];
    const int64_t until = jobtrail::monotonic_ns() + (MetricsServer::kConnectionTimeoutMs - 300) * 1'000'000;
    for (ssize_t n = 1; n > 0 && sent;) {
        const int64_t left_ms = (until - jobtrail::monotonic_ns()) / 1'000'000;
        if (left_ms <= 0 || ::poll(&p, 1, static_cast<int>(left_ms)) != 1) break;
        n = ::read(scrape, buf, sizeof buf);
        if (n > 0) answer.append(buf, static_cast<size_t>(n));
    }
    const auto closed = [](int fd) {
        pollfd q{fd, POLLIN, 0};
        char c;
        return ::poll(&q, 1, 0) == 1 && ::read(fd, &c, 1) == 0;
    };
    const bool oldest_closed = closed(held[0]), others_open = !closed(held[1]) && !closed(held[2]);
    none.reset();
    CHECK(connected);
    CHECK(answer.find("jobtrail_up 1") != std::string::npos);
    CHECK(oldest_closed);  // it gave its descriptor
    CHECK(others_open);    // and only it
    ::close(scrape);
    for (const int fd : held) ::close(fd);
}
