#include "joblog/kernel_line.hpp"

#include "common/text.hpp"
#include "joblog/format.hpp"

namespace jobtrail::joblog {

bool is_kernel_tag(std::string_view tag) {
    return tag == kKmsg || tag == kKmsgContext;
}

std::optional<int64_t> kernel_line_time(std::string_view text) {
    return kmsg::header_line_time(text);
}

KernelLine decode_kernel_line(std::string_view text, int64_t line_ts_ns) {
    KernelLine out;
    out.ts_ns = kernel_line_time(text).value_or(line_ts_ns);
    kmsg::Record rec;
    kmsg::ParseError err;
    if (kmsg::parse_record(unescape_hex(text), rec, err)) out.record = std::move(rec);
    return out;
}

}  // namespace jobtrail::joblog
