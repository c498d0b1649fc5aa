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

}  // namespace jobtrail::node
