#pragma once

#include <string>
#include <string_view>

#include "common/result.hpp"

namespace jobtrail::shipper {

// A container's log file as kubelet names it:
//   <root>/<namespace>_<pod>_<uid>/<container>/<restart>.log
// and, rotated, <restart>.log.<YYYYmmdd-HHMMSS> (later gzip'ed to .gz: never read). The API
// server allows no '_' in a namespace (a DNS label), a pod name (a DNS subdomain) or a container
// name (a DNS label), so the directory splits at its two '_' without doubt; each part is checked
// against those rules, so that a label value is only ever what Kubernetes allows.
struct PodLogPath {
    std::string ns, pod, uid, container;
    bool rotated = false;
};

Result<PodLogPath> parse_pod_log_path(std::string_view root, std::string_view path);

}  // namespace jobtrail::shipper
