#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace jobtrail::forensics::bundle {

// Lines of a file open_read_safe gave us, at most `max` bytes of it: a user's file can be
// endless (or grow while we read), and we run as root.
class BoundedLines {
public:
    // A line longer than max_line comes in pieces: a sparse file of zeros is one "line" as long
    // as the file, and must not be held (or escaped) whole.
    BoundedLines(int fd, uint64_t max, size_t max_line = 256 << 10) : fd_(fd), left_(max), max_line_(max_line) {}
    uint64_t consumed() const { return consumed_; }
    bool next(std::string& line);
    bool cut() const { return cut_; }

private:
    bool fill();
    int fd_;
    uint64_t left_;
    size_t max_line_;
    uint64_t consumed_ = 0;
    std::string buf_;
    size_t pos_ = 0, scanned_ = 0;
    bool eof_ = false, cut_ = false;
};

}  // namespace jobtrail::forensics::bundle
