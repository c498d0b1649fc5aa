#include "node/nccl_file.hpp"

namespace jobtrail::node {
namespace {

constexpr std::string_view kSuffix = ".log";

bool digits(std::string_view s) {
    if (s.empty()) return false;
    for (const char c : s)
        if (c < '0' || c > '9') return false;
    return true;
}

}  // namespace

std::string nccl_file_name(std::string_view step, std::string_view host, std::string_view pid) {
    std::string out;
    out.reserve(step.size() + host.size() + pid.size() + 6);
    out.append(step).append(".").append(host).append(".").append(pid).append(kSuffix);
    return out;
}

std::string nccl_debug_file(const Layout& layout, const std::string& job_id, std::string_view step) {
    return layout.nccl_job_dir(job_id) + "/" + nccl_file_name(step, "%h", "%p");
}

std::optional<NcclFile> parse_nccl_file(std::string_view path) {
    NcclFile f;
    const size_t slash = path.rfind('/');
    std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
    if (slash != std::string_view::npos) {
        const std::string_view dir = path.substr(0, slash);
        const std::string_view job = dir.substr(dir.rfind('/') == std::string_view::npos ? 0 : dir.rfind('/') + 1);
        if (!valid_job_id(job)) return std::nullopt;
        f.job_id = std::string(job);
    }
    if (name.size() <= kSuffix.size() || name.substr(name.size() - kSuffix.size()) != kSuffix) return std::nullopt;
    name.remove_suffix(kSuffix.size());
    const size_t first = name.find('.'), last = name.rfind('.');
    if (first == std::string_view::npos || first == last || first == 0) return std::nullopt;
    // The host sits in the middle and may itself hold dots (NCCL's %h is the short name, but a
    // site may give NCCL_HOSTID); the step never does and the pid is digits.
    f.step = std::string(name.substr(0, first));
    f.host = std::string(name.substr(first + 1, last - first - 1));
    f.pid = std::string(name.substr(last + 1));
    if (f.host.empty() || !digits(f.pid)) return std::nullopt;
    return f;
}

bool plain_name_part(std::string_view s) {
    if (s.empty() || s.size() > 64) return false;
    for (const char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
            return false;
    return true;
}

std::optional<NcclLineOrigin> nccl_line_origin(std::string_view line) {
    const auto text = NcclLine(line).text();
    if (!text) return std::nullopt;
    const size_t c1 = text->find(':');
    if (c1 == std::string_view::npos) return std::nullopt;
    const size_t c2 = text->find(':', c1 + 1);
    if (c2 == std::string_view::npos) return std::nullopt;
    NcclLineOrigin o{text->substr(0, c1), text->substr(c1 + 1, c2 - c1 - 1)};
    if (!plain_name_part(o.host) || !digits(o.pid)) return std::nullopt;
    return o;
}

}  // namespace jobtrail::node
