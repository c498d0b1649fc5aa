#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "forensics/bundle.hpp"
#include "forensics/bundle/collection.hpp"
#include "forensics/staging_dir.hpp"

namespace jobtrail::forensics::bundle {

// manifest.json: what was asked (the command, the job's window, each query and what it gave),
// whether the bundle is complete, what was refused, and each of `files` (staged in `dir`) with
// its size and SHA-256.
std::string manifest_json(const BundleOptions& o, int64_t started_ns, const Gathered& g,
                          const std::vector<Refused>& refused, const StagingDir& dir,
                          const std::vector<std::string>& files);

}  // namespace jobtrail::forensics::bundle
