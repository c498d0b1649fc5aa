#pragma once

#include <span>
#include <string_view>

namespace jobtrail::events {

// How bad an event is for the node and the job. Ordered: a higher value is worse.
enum class Severity { kInfo = 0, kWarning = 1, kError = 2, kFatal = 3 };
std::string_view severity_name(Severity s);

// One row of NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors, resolution buckets as
// mirrored in ../shared/reference). `immediate` is NVIDIA's bucket: RESTART_APP, RESET_GPU,
// RESTART_BM, IGNORE, CONTACT_SUPPORT or a WORKFLOW_*; `action` says it in an operator's words.
struct XidInfo {
    int code;
    std::string_view mnemonic;
    std::string_view meaning;
    std::string_view immediate;
    std::string_view investigatory;
    std::string_view action;
    Severity severity;
};

// nullptr when the code is not in the catalogue.
const XidInfo* find_xid(int code);
std::span<const XidInfo> xid_catalogue();

}  // namespace jobtrail::events
