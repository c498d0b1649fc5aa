#include "forensics/bundle/bounded_lines.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace jobtrail::forensics::bundle {

bool BoundedLines::next(std::string& line) {
    while (true) {
        // From where the last search stopped: a long line costs one scan, not one per read.
        const size_t nl = buf_.find('\n', std::max(pos_, scanned_));
        if (nl != std::string::npos && nl - pos_ <= max_line_) {
            line.assign(buf_, pos_, nl - pos_);
            consumed_ += nl + 1 - pos_;
            pos_ = nl + 1;
            return true;
        }
        if (buf_.size() - pos_ > max_line_) {
            line.assign(buf_, pos_, max_line_);
            consumed_ += max_line_;
            pos_ += max_line_;
            return true;
        }
        scanned_ = buf_.size();
        if (!fill()) {
            if (pos_ >= buf_.size()) return false;
            line.assign(buf_, pos_);  // the last line, without its newline
            consumed_ += buf_.size() - pos_;
            pos_ = buf_.size();
            return true;
        }
    }
}

bool BoundedLines::fill() {
    if (eof_) return false;
    char chunk[65536];
    const size_t want = left_ ? static_cast<size_t>(std::min<uint64_t>(sizeof chunk, left_)) : 1;
    ssize_t n;
    do n = ::read(fd_, chunk, want);
    while (n < 0 && errno == EINTR);
    if (n <= 0 || !left_) {
        eof_ = true;
        cut_ = n > 0 && !left_;  // one byte past the bound: there was more
        return false;
    }
    buf_.erase(0, pos_);
    scanned_ -= std::min(scanned_, pos_);
    pos_ = 0;
    buf_.append(chunk, static_cast<size_t>(n));
    left_ -= static_cast<uint64_t>(n);
    return true;
}

}  // namespace jobtrail::forensics::bundle
