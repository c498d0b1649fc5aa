#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/fs.hpp"
#include "common/stamps.hpp"
#include "common/time.hpp"

namespace jobtrail::joblog {

// Writes one job log file (<log_dir>/<phase>/<jobid>.log) as root, mode 0640, never through a
// symlink, appending (a requeued job keeps its earlier runs). Output is capped: past
// max_bytes one truncation notice is written and further lines are counted, except the
// footer (`force`), which always lands so the exit status is never lost.
class Writer {
public:
    Writer(uint64_t max_bytes, uint64_t max_line_bytes) : max_bytes_(max_bytes), max_line_(max_line_bytes) {}
    ~Writer() { flush(); }
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;

    Status open(const std::string& dir, const std::string& file_name);
    bool is_open() const { return fd_.valid(); }

    // ts_ns is raised to just past the previous line's when it is not later: every line of a
    // file has its own, strictly increasing time.
    void line(int64_t ts_ns, std::string_view tag, std::string_view name, std::string_view text, bool force = false);
    // A line stamped now.
    void line_now(std::string_view tag, std::string_view name, std::string_view text, bool force = false) {
        line(realtime_ns(), tag, name, text, force);
    }
    bool flush();

    uint64_t bytes_written() const { return written_; }
    uint64_t lines_dropped() const { return dropped_; }
    const std::string& path() const { return path_; }
    const std::string& write_error() const { return write_error_; }

private:
    Fd fd_;
    std::string path_;
    std::string buf_;
    uint64_t max_bytes_;
    uint64_t max_line_;
    uint64_t written_ = 0;  // bytes accepted (buffered or on disk) in this run
    uint64_t dropped_ = 0;
    bool capped_ = false;
    StrictStamps stamps_;
    std::string write_error_;
};

}  // namespace jobtrail::joblog
