#include "shipper/metrics_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "common/fs.hpp"
#include "common/time.hpp"
#include "shipper/metrics.hpp"

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

std::string render_metrics(Metrics& m, const std::array<uint64_t, kLanes>& pending) {
    std::string s;
    uint64_t spool_pending_bytes = 0;
    for (const uint64_t p : pending) spool_pending_bytes += p;
    auto counter = [&](const char* name, const char* help, uint64_t v) {
        s += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " " +
             std::to_string(v) + "\n";
    };
    counter("jobtrail_shipper_records_read_total", "Records read from all sources (before the stages drop any).",
            m.read);
    counter("jobtrail_shipper_records_spooled_total", "Records made durable in the spool.", m.spooled);
    counter("jobtrail_shipper_records_sent_total", "Records Loki acknowledged.", m.sent);
    counter("jobtrail_shipper_bytes_sent_total", "Line bytes Loki acknowledged.", m.sent_bytes);
    counter("jobtrail_shipper_push_requests_total", "Push requests made.", m.pushes);
    counter("jobtrail_shipper_retries_total", "Pushes retried (429, 5xx, transport errors).", m.retries);
    counter("jobtrail_shipper_spool_full_total", "Passes where sources paused on a full spool.", m.spool_full);
    counter("jobtrail_shipper_kmsg_lost_total", "Kernel records overwritten before they were read.", m.kmsg_lost);
    counter("jobtrail_shipper_partial_lines_cut_total",
            "Unterminated lines shipped before their end, their rest as new lines, to keep a file source under its "
            "max_partial_bytes.",
            m.partial_lines_cut);
    counter("jobtrail_shipper_cri_malformed_lines_total",
            "Lines of CRI (container) log files that were not CRI lines, shipped as they are.", m.cri_malformed);
    counter("jobtrail_shipper_cri_lines_cut_total",
            "CRI partial lines shipped before their F line: longer than max_line_bytes, or left at the end of a "
            "rotated file.",
            m.cri_lines_cut);
    s += "# HELP jobtrail_shipper_spool_bytes Unacknowledged bytes in the spool.\n# TYPE jobtrail_shipper_spool_bytes "
         "gauge\njobtrail_shipper_spool_bytes " +
         std::to_string(spool_pending_bytes) + "\n";
    s += "# HELP jobtrail_shipper_spool_lane_bytes Unacknowledged bytes in each spool lane (node: kernel, job logs, "
         "journal, fabric manager; jobs: NCCL).\n# TYPE jobtrail_shipper_spool_lane_bytes gauge\n";
    for (size_t i = 0; i < kLanes; ++i)
        s += "jobtrail_shipper_spool_lane_bytes{lane=\"" + std::string(lane_name(static_cast<Lane>(i))) + "\"} " +
             std::to_string(pending[i]) + "\n";
    s += "# HELP jobtrail_shipper_last_success_timestamp_seconds Last acknowledged push.\n# TYPE "
         "jobtrail_shipper_last_success_timestamp_seconds gauge\njobtrail_shipper_last_success_timestamp_seconds " +
         std::to_string(m.last_success_ns / 1'000'000'000) + "\n";
    s += "# HELP jobtrail_shipper_loki_limit_bytes_per_second Rate limits Loki named in a 429 (0: none seen); pushes "
         "are sized and paced below them.\n# TYPE jobtrail_shipper_loki_limit_bytes_per_second gauge\n"
         "jobtrail_shipper_loki_limit_bytes_per_second{limit=\"tenant\"} " +
         std::to_string(m.loki_tenant_rate_limit_bytes) +
         "\njobtrail_shipper_loki_limit_bytes_per_second{limit=\"per_stream\"} " +
         std::to_string(m.loki_stream_rate_limit_bytes) + "\n";
    // The unlabelled age is the node lane's: its timestamps are the kernel's and root's, while a
    // job's user writes the NCCL lines' own.
    const int64_t now = realtime_ns();
    auto age = [&](size_t i) {
        const int64_t o = m.oldest_pending_ns[i];
        return std::to_string(o && pending[i] ? std::max<int64_t>(0, now - o) / 1'000'000'000 : 0);
    };
    s += "# HELP jobtrail_shipper_spool_oldest_age_seconds Age of the oldest record of the node lane (kernel, job "
         "logs, journal) Loki has not acknowledged (0: none).\n# TYPE jobtrail_shipper_spool_oldest_age_seconds "
         "gauge\njobtrail_shipper_spool_oldest_age_seconds " +
         age(lane_index(Lane::kNode)) + "\n";
    s += "# HELP jobtrail_shipper_lane_oldest_age_seconds Age of the oldest unacknowledged record, per spool lane, "
         "by the record's own timestamp (0: none).\n# TYPE jobtrail_shipper_lane_oldest_age_seconds gauge\n";
    for (size_t i = 0; i < kLanes; ++i)
        s += "jobtrail_shipper_lane_oldest_age_seconds{lane=\"" + std::string(lane_name(static_cast<Lane>(i))) +
             "\"} " + age(i) + "\n";
    s += "# HELP jobtrail_shipper_lane_last_success_timestamp_seconds Last acknowledged push, per spool lane.\n# "
         "TYPE jobtrail_shipper_lane_last_success_timestamp_seconds gauge\n";
    for (size_t i = 0; i < kLanes; ++i)
        s += "jobtrail_shipper_lane_last_success_timestamp_seconds{lane=\"" +
             std::string(lane_name(static_cast<Lane>(i))) + "\"} " +
             std::to_string(m.lane_last_success_ns[i] / 1'000'000'000) + "\n";
    std::lock_guard<std::mutex> lk(m.mu);
    s += "# HELP jobtrail_shipper_source_backlog_bytes Bytes written to a source and not read yet.\n# TYPE "
         "jobtrail_shipper_source_backlog_bytes gauge\n";
    for (const auto& [src, b] : m.source_backlog_bytes)
        s += "jobtrail_shipper_source_backlog_bytes{source=\"" + src + "\"} " + std::to_string(b) + "\n";
    s += "# HELP jobtrail_shipper_source_last_read_timestamp_seconds Timestamp of the newest record read, per "
         "source.\n# TYPE jobtrail_shipper_source_last_read_timestamp_seconds gauge\n";
    for (const auto& [src, ts] : m.source_last_read_ns)
        s += "jobtrail_shipper_source_last_read_timestamp_seconds{source=\"" + src + "\"} " +
             std::to_string(ts / 1'000'000'000) + "\n";
    s += "# HELP jobtrail_shipper_dropped_total Records dropped, by reason.\n# TYPE jobtrail_shipper_dropped_total "
         "counter\n";
    for (const auto& [r, n] : m.dropped)
        s += "jobtrail_shipper_dropped_total{reason=\"" + r + "\"} " + std::to_string(n) + "\n";
    s += "# HELP jobtrail_shipper_rejected_total Entries Loki rejected, by reason.\n# TYPE "
         "jobtrail_shipper_rejected_total "
         "counter\n";
    for (const auto& [r, n] : m.rejected)
        s += "jobtrail_shipper_rejected_total{reason=\"" + r + "\"} " + std::to_string(n) + "\n";
    s += "# HELP jobtrail_shipper_files_refused_total Files matching a source's paths that were not read (a "
         "symlink, FIFO, device, hard link or another owner's file), by reason.\n# TYPE "
         "jobtrail_shipper_files_refused_total counter\n";
    for (const auto& [r, n] : m.files_refused)
        s += "jobtrail_shipper_files_refused_total{reason=\"" + r + "\"} " + std::to_string(n) + "\n";
    s += "# HELP jobtrail_shipper_internal_events_total Named events of the shipper's components (a source that "
         "cannot open its input, a refused file, a rejected push), by component and event.\n# TYPE "
         "jobtrail_shipper_internal_events_total counter\n";
    for (const auto& [k, n] : m.events)
        s += "jobtrail_shipper_internal_events_total{component=\"" + k.first + "\",event=\"" + k.second + "\"} " +
             std::to_string(n) + "\n";
    return s;
}

}  // namespace jobtrail::shipper
