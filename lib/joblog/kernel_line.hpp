#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "kmsg/record.hpp"

// A job log's kernel line: tag kmsg (a record from during the job) or kmsg-context (from before
// it), its text the /dev/kmsg record in one line (kmsg::format_header_line), \xNN-escaped as every
// job log text is. The same text in a job log file and as the shipper sends it.
namespace jobtrail::joblog {

bool is_kernel_tag(std::string_view tag);

// The record's own time (time= in its header): the line is stamped when the collector wrote it,
// which for the prolog's kernel context is hours later. nullopt when the header has none.
std::optional<int64_t> kernel_line_time(std::string_view text);

struct KernelLine {
    int64_t ts_ns = 0;                   // the record's own time, else the line's stamp
    std::optional<kmsg::Record> record;  // nullopt when the text is not a record
};

// A kernel line's text back into its record, at its time.
KernelLine decode_kernel_line(std::string_view text, int64_t line_ts_ns);

}  // namespace jobtrail::joblog
