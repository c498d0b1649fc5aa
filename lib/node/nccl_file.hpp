#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/time.hpp"
#include "node/layout.hpp"

// The name of an NCCL debug file and the stamp before each of its lines: the plugin makes
// NCCL_DEBUG_FILE and NCCL_DEBUG_TIMESTAMP_FORMAT from these (NCCL expands %h to the host and %p
// to the pid), the shipper and the bundle parse the files' names and lines back. Maker and parser
// sit together so that they cannot drift apart.
namespace jobtrail::node {

// <step>.<host>.<pid>.log
std::string nccl_file_name(std::string_view step, std::string_view host, std::string_view pid);
// <nccl_dir>/<jobid>/<step>.%h.%p.log: the value of NCCL_DEBUG_FILE.
std::string nccl_debug_file(const Layout& layout, const std::string& job_id, std::string_view step);

struct NcclFile {
    std::string job_id;  // from the directory; empty when parsing a bare name
    std::string step, host, pid;
};
// A file's name (or its path: then the directory above it must be a job id) back into its parts;
// nullopt for anything that is not one of ours.
std::optional<NcclFile> parse_nccl_file(std::string_view path);

// The stamp NCCL puts before each line (NCCL_DEBUG_TIMESTAMP_FORMAT, set by the plugin):
// "[2026-11-29T22:16:02.867605+0000] ". NCCL prints local time; %z records the offset, so the
// line is unambiguous without touching the job's TZ. Microseconds: enough to order lines of one
// process.
inline constexpr const char* kNcclStampFormat = "[%FT%T.%6f%z] ";

// One line of an NCCL file split at its stamp: "[<stamp>] <text>", or all text without one.
// One search for the bracket serves both halves: this is the shipper's hottest path.
class NcclLine {
public:
    explicit NcclLine(std::string_view line)
        : line_(line), close_(!line.empty() && line[0] == '[' ? line.find(']') : std::string_view::npos) {}
    // The stamp's instant, through one file's parser (it parses the second once); nullopt when
    // the line has no stamp.
    std::optional<int64_t> time(Rfc3339Parser& stamps) const {
        if (line_.size() < 28 || close_ > 40) return std::nullopt;  // also when there is none (npos)
        return stamps.parse(line_.substr(1, close_ - 1));
    }
    // What follows the stamp and its space: NCCL's "host:pid:tid ..." prefix, or a user's text.
    // nullopt when the line opens a bracket it does not close within 64 bytes.
    std::optional<std::string_view> text() const {
        if (line_.empty() || line_[0] != '[') return line_;
        if (close_ > 64) return std::nullopt;  // also when there is none (npos)
        size_t pos = close_ + 1;
        if (pos < line_.size() && line_[pos] == ' ') ++pos;
        return line_.substr(pos);
    }

private:
    std::string_view line_;
    size_t close_;  // where the leading '[' closes; npos: none
};

// Where NCCL's line prefix says a line came from: "[<stamp>] host:pid:tid ..." (or without the
// stamp). With the step, it names the file back (nccl_file_name), so a line of one of our files
// need not carry the file's name: the shipper sends only the step when the line says the rest.
struct NcclLineOrigin {
    std::string_view host, pid;
};
std::optional<NcclLineOrigin> nccl_line_origin(std::string_view line);
// A step, host or pid as a file name part that names a file back unambiguously.
bool plain_name_part(std::string_view s);

}  // namespace jobtrail::node
