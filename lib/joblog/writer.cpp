#include "joblog/writer.hpp"

#include "common/text.hpp"
#include "common/time.hpp"
#include "joblog/format.hpp"

namespace jobtrail::joblog {

Status Writer::open(const std::string& dir, const std::string& file_name) {
    if (auto st = make_dirs(dir, 0755); !st.ok) return st;
    path_ = dir + "/" + file_name;
    auto fd = open_append_safe(dir, file_name, 0640);
    if (!fd.ok) return fd;
    fd_ = std::move(fd.value);
    return {};
}

void Writer::line(int64_t ts_ns, std::string_view tag, std::string_view name, std::string_view text, bool force) {
    if (capped_ && !force) {
        ++dropped_;
        return;
    }
    std::string truncated;
    if (text.size() > max_line_) {
        const std::string_view keep = utf8_prefix(text, max_line_);
        truncated = std::string(keep) + " [jobtrail: line truncated, " + std::to_string(text.size() - keep.size()) +
                    " bytes dropped]";
        text = truncated;
    }
    const size_t before = buf_.size();
    append_line(buf_, stamps_.next(ts_ns), tag, name, text);
    const size_t len = buf_.size() - before;
    if (!force && written_ + len > max_bytes_) {
        buf_.resize(before);
        capped_ = true;
        ++dropped_;
        append_line(buf_, stamps_.now(), kJobtrail, "",
                    "log truncated: reached max_log_bytes=" + std::to_string(max_bytes_) +
                        "; further lines are dropped until the footer");
        return;
    }
    written_ += len;
    if (buf_.size() >= size_t{64} * 1024) flush();
}

bool Writer::flush() {
    if (buf_.empty()) return true;
    if (!fd_.valid()) {
        buf_.clear();
        return false;
    }
    const bool ok = write_all(fd_.get(), buf_);
    if (!ok && write_error_.empty()) write_error_ = "write to " + path_ + " failed: " + errno_text(errno);
    buf_.clear();
    return ok;
}

}  // namespace jobtrail::joblog
