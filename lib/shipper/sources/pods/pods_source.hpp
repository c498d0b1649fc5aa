#pragma once

#include "shipper/sources/file/file_source.hpp"
#include "shipper/sources/pods/config.hpp"

namespace jobtrail::shipper {

// The pods source is a file source (safe opening, rotation by inode, fingerprints, checkpoints,
// bounded descriptors and partial lines) over kubelet's tree, in the CRI format, with this
// labeler naming each container's stream from its path.
Labeler pod_labeler(const PodsConfig& c);

// The file source's settings for kubelet's tree.
FileSourceConfig pod_files(const PodsConfig& c);

}  // namespace jobtrail::shipper
