// The spool's write side: records appended into the open run and segment, written and synced by the group commit.
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

Spool::Append Spool::append(const Record& r, bool past_cap) {
    return append(RecordRef{r.ts_ns, r.stream, r.line, &r.metadata, nullptr}, past_cap);
}

Spool::Append Spool::append(const RecordRef& r, bool past_cap) {
    std::lock_guard<std::mutex> lk(mu_);
    return append_locked(r, past_cap);
}

void Spool::append_all(std::span<const RecordRef> records) {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& r : records) append_locked(r, /*past_cap=*/true);
}

Spool::Append Spool::append_locked(const RecordRef& r, bool past_cap) {
    const size_t rec = RunBuilder::entry_size(r);
    const bool joins = run_.open() && run_.stream() == r.stream && run_.raw_size() + rec <= kMaxRun;
    // What the open run takes is known only when it is closed (compressed): the cap and the
    // segment's size count it at its bound meanwhile.
    const uint64_t open_run = open_run_bound();
    uint64_t len = joins ? RunBuilder::frame_bound(r.stream, run_.raw_size() + rec) - open_run
                         : RunBuilder::frame_bound(r.stream, rec);
    // Past the segment's size it goes to the next one, in a run of its own: counted as such.
    // After a failed roll, not again before the next sync().
    const uint64_t open = write_size_ + open_run;
    const bool roll = !roll_failed_ && open > 0 && open + len > opts_.segment_bytes;
    if (roll) len = RunBuilder::frame_bound(r.stream, rec);
    if (!past_cap && used_bytes() + len > opts_.max_bytes) return Append::kFull;
    if (roll) {
        // Finish this segment (what is buffered belongs to it), then roll over. Should that
        // fail (a full disk, no descriptor left), the record goes into this segment, past its
        // size: it is kept, sync() writes it, and the roll is tried again after that.
        roll_failed_ = true;
        if (flush_buffer()) {
            if (opts_.fsync && ::fdatasync(write_fd_.get()) != 0) {
                broken_ = error_ = "fdatasync " + segment_path(write_id_) + ": " + errno_text(errno);
            } else {
                durable_size_.back() = write_size_;
                roll_failed_ = !start_segment(write_id_ + 1);
            }
        }
    }
    if (!joins || roll) {
        end_open_run();
        // Closed runs go to the kernel early (no fsync): memory stays small between syncs. A
        // failure is tried again by the next sync().
        if (buf_.size() >= kFlushBytes) write_buffer();
        run_.begin(r.stream);
    }
    run_.add(r, rec);
    return Append::kOk;
}

void Spool::end_open_run() {
    const size_t before = buf_.size();
    run_.finish(buf_);
    write_size_ += buf_.size() - before;
}

bool Spool::flush_buffer() {
    end_open_run();
    return write_buffer();
}

bool Spool::write_buffer() {
    size_t done = 0;
    while (done < buf_.size()) {
        const ssize_t n = ::write(write_fd_.get(), buf_.data() + done, buf_.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            error_ = "write to " + segment_path(write_id_) + ": " + errno_text(n < 0 ? errno : EIO);
            // What reached the file stays there: a retry (the next sync) writes only the rest,
            // or the file would hold those frames twice.
            buf_.erase(0, done);
            return false;
        }
        done += static_cast<size_t>(n);
    }
    buf_.clear();
    if (buf_.capacity() > 1 << 20) std::string().swap(buf_);  // grown for one huge record: not kept
    return true;
}

Status Spool::sync() {
    std::lock_guard<std::mutex> lk(mu_);
    roll_failed_ = false;  // the next append past the segment's size tries again
    // A failed fdatasync may not fail again (the kernel reports a lost write-back once): nothing
    // is durable from then on, until open() cuts the spool back to the caller's checkpoint.
    if (!broken_.empty()) return Status::failure(broken_ + " earlier: the spool must be opened again");
    if (!flush_buffer()) return Status::failure(error_);
    if (opts_.fsync && ::fdatasync(write_fd_.get()) != 0) {
        broken_ = error_ = "fdatasync " + segment_path(write_id_) + ": " + errno_text(errno);
        return Status::failure(error_);
    }
    durable_size_.back() = write_size_;  // the write segment is always the last
    pending_ = durable_after_ack();
    if (!opts_.gate_reads) {
        readable_end_ = {segments_.back(), durable_size_.back()};
        readable_cv_.notify_all();
    }
    return {};
}

}  // namespace jobtrail::spool
