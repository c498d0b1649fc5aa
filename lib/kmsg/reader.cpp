#include "kmsg/reader.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "kmsg/record.hpp"

namespace jobtrail::kmsg {

jobtrail::Status Reader::open(const std::string& path, bool non_blocking) {
    const int flags = O_RDONLY | O_CLOEXEC | (non_blocking ? O_NONBLOCK : 0);
    Fd fd(::open(path.c_str(), flags));
    if (!fd.valid()) {
        return jobtrail::Status::failure("cannot open " + path + ": " + errno_text(errno));
    }
    fd_ = std::move(fd);
    path_ = path;
    have_expected_ = false;
    held_ = false;
    pending_overrun_ = false;
    return {};
}

jobtrail::Status Reader::seek_start() {
    if (::lseek(fd_.get(), 0, SEEK_SET) < 0) {
        return jobtrail::Status::failure("cannot seek to the start of " + path_ + ": " + errno_text(errno));
    }
    have_expected_ = false;
    held_ = false;
    return {};
}

jobtrail::Status Reader::seek_end() {
    if (::lseek(fd_.get(), 0, SEEK_END) < 0) {
        return jobtrail::Status::failure("cannot seek to the end of " + path_ + ": " + errno_text(errno));
    }
    have_expected_ = false;
    held_ = false;
    return {};
}

Reader::Status Reader::next() {
    if (held_) {
        held_ = false;
        expected_ = seq_ + 1;
        have_expected_ = true;
        return Status::kRecord;
    }
    for (;;) {
        const ssize_t n = ::read(fd_.get(), buf_, sizeof buf_);
        if (n < 0) {
            const int e = errno;
            if (e == EINTR) continue;
            if (e == EAGAIN) return Status::kWouldBlock;
            if (e == EPIPE) {
                // The kernel already moved us to the oldest record; the count comes from the
                // sequence gap of the next record we read.
                pending_overrun_ = true;
                continue;
            }
            if (e == EINVAL) {
                // Record larger than our buffer: the kernel skipped it; the seq gap counts it.
                continue;
            }
            error_ = "read from " + path_ + ": " + errno_text(e);
            return Status::kError;
        }
        if (n == 0) return Status::kWouldBlock;  // regular files end; the device never does
        raw_ = std::string_view(buf_, static_cast<size_t>(n));
        uint64_t seq = 0, usec = 0;
        if (!parse_header(raw_, seq, usec)) {
            // Still a record; let the caller's full parser report what is wrong with it.
            seq = have_expected_ ? expected_ : 0;
        }
        seq_ = seq;
        if (have_expected_ && seq > expected_) {
            lost_ = seq - expected_;
            overrun_ = pending_overrun_;
            pending_overrun_ = false;
            held_ = true;
            return Status::kLost;
        }
        pending_overrun_ = false;
        expected_ = seq + 1;
        have_expected_ = true;
        return Status::kRecord;
    }
}

}  // namespace jobtrail::kmsg
