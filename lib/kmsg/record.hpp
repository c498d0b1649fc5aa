#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace jobtrail::kmsg {

// One /dev/kmsg record: "<prio>,<seq>,<usec>,<flags>[,more];<text>\n( KEY=value\n)*"
// (Documentation/ABI/testing/dev-kmsg).
struct Record {
    uint8_t facility = 0;
    uint8_t level = 0;
    uint64_t seq = 0;
    uint64_t usec = 0;    // monotonic microseconds since boot
    char flag = '-';      // '-' complete, 'c' first fragment of a line, '+' later fragment
    std::string message;  // \xNN escapes decoded: the bytes the kernel printed
    std::vector<std::pair<std::string, std::string>> dict;  // continuation lines, e.g. SUBSYSTEM=pci

    unsigned prio() const { return (static_cast<unsigned>(facility) << 3) | level; }
    // Value of a continuation key (SUBSYSTEM, DEVICE), or empty.
    std::string_view dict_value(std::string_view key) const;
};

struct ParseError {
    std::string what;
    size_t offset = 0;  // byte offset in the record where parsing stopped
};

// Parses one record as returned by a single read() of /dev/kmsg. Never throws; malformed
// input gives false and fills err. Unknown extra header fields are ignored, as the ABI asks.
bool parse_record(std::string_view raw, Record& out, ParseError& err);

// Reads only the header numbers, for scans that skip most records cheaply.
bool parse_header(std::string_view raw, uint64_t& seq, uint64_t& usec);

// The record back in /dev/kmsg syntax on one line (message re-escaped; dict not included).
// A non-zero wall_ns adds a fifth header field "time=<RFC 3339>" (the ABI's room for more
// fields, which readers ignore): the record's own time where the line is stamped otherwise.
std::string format_header_line(const Record& r, int64_t wall_ns = 0);

// The "time=" field of such a line, if it has one.
std::optional<int64_t> header_line_time(std::string_view line);

const char* level_name(uint8_t level);  // "emerg" .. "debug"

}  // namespace jobtrail::kmsg
