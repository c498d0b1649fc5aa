#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/result.hpp"
#include "forensics/staging_dir.hpp"

namespace jobtrail::forensics::bundle {

// The archive holds root's logs (prolog/epilog logs are 0640, kernel records): the file and
// its members are the operator's, who decides whom to give them to. 0600, not 0640: a group
// means nothing in a shared output directory or where the archive is extracted.
inline constexpr mode_t kArchiveMode = 0600;

// SHA-256 of a file from its start, as lowercase hex; empty if it cannot be read.
std::string sha256_fd(int fd);

struct Published {
    std::string path;        // <out_dir>/<top>.tar.zst
    bool published = false;  // the archive is there (its checksum may not be: see status)
    Status status;
};

// <top>.tar.zst of `files` (staged, read back through the staging directory's descriptors, each
// under <top>/), and its <top>.tar.zst.sha256, into the output directory; <top>-2... when that
// name is taken (StagingDir::claim_output).
Published publish_archive(StagingDir& dir, const std::string& top, const std::vector<std::string>& files);

}  // namespace jobtrail::forensics::bundle
