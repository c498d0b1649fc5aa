#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "node/layout.hpp"

// The name of an NCCL debug file: the plugin makes NCCL_DEBUG_FILE from it (NCCL expands %h to
// the host and %p to the pid), the shipper and the bundle parse the files' names back. The two
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
