#pragma once

#include <cstdint>
#include <string>
#include <string_view>

// The job log line format (docs/job-log-format.md). Stable: the shipper and `jobtrail bundle`
// parse it.
//
//   <timestamp> <tag> <text>
//
// timestamp: RFC 3339, UTC, nine fractional digits (2026-11-29T21:42:10.123456789Z)
// tag:       [a-z][a-z0-9-]* optionally followed by [NAME] (NAME without spaces or ']')
// text:      the rest of the line; invalid UTF-8 and control characters escaped as \xNN
namespace jobtrail::joblog {

struct Line {
    int64_t ts_ns = 0;
    std::string_view tag;   // e.g. "stdout"
    std::string_view name;  // e.g. "10-health.sh" for "stdout[10-health.sh]"; empty if none
    std::string_view text;
};

// Tags written by the collectors.
inline constexpr std::string_view kMeta = "meta";                 // header: key=value job facts
inline constexpr std::string_view kRun = "run";                   // a site script or probe starts
inline constexpr std::string_view kStdout = "stdout";             // [script] output line
inline constexpr std::string_view kStderr = "stderr";             // [script] error output line
inline constexpr std::string_view kProbe = "probe";               // [probe] output line
inline constexpr std::string_view kProbeErr = "probe-err";        // [probe] error output line
inline constexpr std::string_view kStatus = "status";             // [script|probe] how it ended
inline constexpr std::string_view kKmsg = "kmsg";                 // kernel record during the job
inline constexpr std::string_view kKmsgContext = "kmsg-context";  // kernel record before the job
inline constexpr std::string_view kKmsgDict = "kmsg-dict";        // KEY=value of the preceding record
inline constexpr std::string_view kKmsgLost = "kmsg-lost";        // records the ring lost
inline constexpr std::string_view kEvent = "event";               // recognised kernel event (summary)
inline constexpr std::string_view kDevice = "device";             // prolog: a device the job was given
inline constexpr std::string_view kJobtrail = "jobtrail";         // the collector's own notices/errors
inline constexpr std::string_view kEnd = "end";                   // footer: exit status, duration

// Makes a name usable inside [ ]: spaces and brackets become '_'.
std::string tag_name(std::string_view name);

// Appends one formatted line (with '\n') to out; text is escaped, name sanitised.
void append_line(std::string& out, int64_t ts_ns, std::string_view tag, std::string_view name, std::string_view text);

// Parses one line (without its '\n'). Views point into `line`.
bool parse_line(std::string_view line, Line& out);

}  // namespace jobtrail::joblog
