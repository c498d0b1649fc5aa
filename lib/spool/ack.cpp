// The acknowledged position: taken after Loki answers, persisted at most twice a second, and what is pending.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "common/time.hpp"
#include "spool/spool.hpp"

namespace jobtrail::spool {

Status Spool::ack(const Position& pos) {
    std::lock_guard<std::mutex> lk(mu_);
    const Position before = acked_;
    acked_ = pos;
    const bool frees = segments_.size() > 1 && segments_.front() < pos.segment;
    if (frees || opts_.ack_persist_ms <= 0 || monotonic_ns() - persisted_ns_ >= opts_.ack_persist_ms * 1'000'000) {
        if (auto st = persist_ack(); !st.ok) {
            // Not moved, as if not answered: its segments stay and still count against max_bytes.
            acked_ = before;
            return st;
        }
    }
    pending_ = durable_after_ack();
    return Status::success();
}

Status Spool::flush_ack() {
    std::lock_guard<std::mutex> lk(mu_);
    if (opts_.dir.empty() || acked_ == persisted_ack_) return Status::success();
    return persist_ack();
}

Status Spool::persist_ack() {
    const std::string body = std::to_string(acked_.segment) + " " + std::to_string(acked_.offset) + "\n";
    if (auto st = write_file_atomic(opts_.dir + "/acked", body, 0600); !st.ok) {
        error_ = st.error;
        return st;
    }
    persisted_ack_ = acked_;
    persisted_ns_ = monotonic_ns();
    // Segments wholly acknowledged on disk (and not the one being written) go.
    while (segments_.size() > 1 && segments_.front() < persisted_ack_.segment) {
        if (read_fd_segment_ == segments_.front()) read_fd_.reset(-1);
        ::unlink(segment_path(segments_.front()).c_str());
        segments_.erase(segments_.begin());
        durable_size_.erase(durable_size_.begin());
    }
    return Status::success();
}

void Spool::rewind() {
    std::lock_guard<std::mutex> lk(mu_);
    read_ = acked_;
}

uint64_t Spool::pending_bytes() const {
    std::lock_guard<std::mutex> lk(mu_);
    return pending_;
}

uint64_t Spool::used_bytes_now() const {
    std::lock_guard<std::mutex> lk(mu_);
    return used_bytes();
}

Position Spool::acked() const {
    std::lock_guard<std::mutex> lk(mu_);
    return acked_;
}

}  // namespace jobtrail::spool
