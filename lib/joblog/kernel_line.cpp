#include "joblog/kernel_line.hpp"

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
    // The header line's own escapes are the only ones: it holds no byte the job log escapes
    // again, so unescaping here too would decode text the kernel printed as text.
    if (kmsg::parse_record(text, rec, err)) out.record = std::move(rec);
    return out;
}

}  // namespace jobtrail::joblog
