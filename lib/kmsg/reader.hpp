#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/fs.hpp"

namespace jobtrail::kmsg {

// Reads a device with /dev/kmsg semantics: each read() returns exactly one record, EPIPE
// means records were overwritten before we read them (the position jumps to the oldest one),
// EAGAIN means no record is ready in non-blocking mode.
class Reader {
public:
    // Buffer for one read: CONSOLE_EXT_LOG_MAX, the largest record the kernel formats. A smaller
    // buffer makes the kernel drop the record with EINVAL.
    static constexpr size_t kBufferSize = 8192;

    enum class Status {
        kRecord,      // raw() holds one record
        kLost,        // lost() records were overwritten (or skipped) since the last one we read
        kWouldBlock,  // nothing to read now (non-blocking)
        kError,       // error() says what; reading cannot continue
    };

    Reader() = default;
    // Opens path read-only; non_blocking selects O_NONBLOCK.
    jobtrail::Status open(const std::string& path, bool non_blocking);
    void close() { fd_.reset(); }
    bool is_open() const { return fd_.valid(); }
    int fd() const { return fd_.get(); }

    jobtrail::Status seek_start();  // oldest record still in the ring
    jobtrail::Status seek_end();    // only records written from now on

    // Tells the reader which sequence number the caller expects next, so that a gap before the
    // first record read is reported as loss (used when resuming from a saved position).
    void expect_seq(uint64_t seq) {
        expected_ = seq;
        have_expected_ = true;
    }

    Status next();
    std::string_view raw() const { return raw_; }
    uint64_t seq() const { return seq_; }
    uint64_t lost() const { return lost_; }
    bool overrun() const { return overrun_; }  // the loss was signalled by EPIPE
    const std::string& error() const { return error_; }

private:
    Fd fd_;
    std::string path_;
    char buf_[kBufferSize];
    std::string_view raw_;
    uint64_t seq_ = 0;
    uint64_t expected_ = 0;
    bool have_expected_ = false;
    uint64_t lost_ = 0;
    bool overrun_ = false;
    bool pending_overrun_ = false;
    std::string error_;
    // A record read together with a loss report is held back and returned on the next call.
    bool held_ = false;
};

}  // namespace jobtrail::kmsg
