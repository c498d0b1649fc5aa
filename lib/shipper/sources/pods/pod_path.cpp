#include "shipper/sources/pods/pod_path.hpp"

namespace jobtrail::shipper {
namespace {

bool lower_alnum(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool digits(std::string_view s) {
    if (s.empty()) return false;
    for (const char c : s)
        if (c < '0' || c > '9') return false;
    return true;
}

// RFC 1123 label (namespaces, container names): [a-z0-9-], 1..63, alphanumeric at both ends.
bool dns_label(std::string_view s) {
    if (s.empty() || s.size() > 63 || !lower_alnum(s.front()) || !lower_alnum(s.back())) return false;
    for (const char c : s)
        if (!lower_alnum(c) && c != '-') return false;
    return true;
}

// RFC 1123 subdomain (pod names): dot-separated labels, 1..253.
bool dns_subdomain(std::string_view s) {
    if (s.empty() || s.size() > 253) return false;
    for (size_t at = 0;;) {
        const size_t dot = s.find('.', at);
        if (!dns_label(s.substr(at, dot == std::string_view::npos ? dot : dot - at))) return false;
        if (dot == std::string_view::npos) return true;
        at = dot + 1;
    }
}

// A pod's uid (a UUID) or, for a static pod, the hash kubelet uses instead.
bool pod_uid(std::string_view s) {
    if (s.empty() || s.size() > 64) return false;
    for (const char c : s)
        if (!lower_alnum(c) && !(c >= 'A' && c <= 'F') && c != '-') return false;
    return true;
}

// kubelet's rotation suffix, time.Format("20060102-150405").
bool rotation_stamp(std::string_view s) {
    return s.size() == 15 && s[8] == '-' && digits(s.substr(0, 8)) && digits(s.substr(9));
}

}  // namespace

Result<PodLogPath> parse_pod_log_path(std::string_view root, std::string_view path) {
    const auto bad = [&](const std::string& why) {
        return Status::failure(std::string(path) +
                               ": not a kubelet pod log (<namespace>_<pod>_<uid>/<container>/<n>.log): " + why);
    };
    if (path.size() <= root.size() + 1 || path.substr(0, root.size()) != root || path[root.size()] != '/')
        return bad("not under " + std::string(root));
    const std::string_view rest = path.substr(root.size() + 1);
    const size_t s1 = rest.find('/');
    const size_t s2 = s1 == std::string_view::npos ? s1 : rest.find('/', s1 + 1);
    if (s2 == std::string_view::npos || rest.find('/', s2 + 1) != std::string_view::npos)
        return bad("expected three levels below the root");
    const std::string_view dir = rest.substr(0, s1), container = rest.substr(s1 + 1, s2 - s1 - 1),
                           file = rest.substr(s2 + 1);
    const size_t u1 = dir.find('_');
    const size_t u2 = u1 == std::string_view::npos ? u1 : dir.find('_', u1 + 1);
    if (u2 == std::string_view::npos || dir.find('_', u2 + 1) != std::string_view::npos)
        return bad("the pod directory is not <namespace>_<pod>_<uid>");
    PodLogPath p;
    p.ns = dir.substr(0, u1);
    p.pod = dir.substr(u1 + 1, u2 - u1 - 1);
    p.uid = dir.substr(u2 + 1);
    p.container = container;
    if (!dns_label(p.ns)) return bad("namespace '" + p.ns + "' is not a DNS label");
    if (!dns_subdomain(p.pod)) return bad("pod name '" + p.pod + "' is not a DNS subdomain");
    if (!pod_uid(p.uid)) return bad("pod uid '" + p.uid + "' is not a uid");
    if (!dns_label(p.container)) return bad("container name '" + p.container + "' is not a DNS label");
    const size_t dot = file.find('.');
    if (dot == std::string_view::npos || !digits(file.substr(0, dot)) || file.substr(dot, 4) != ".log")
        return bad("file '" + std::string(file) + "' is not <restart count>.log");
    const std::string_view suffix = file.substr(dot + 4);
    if (!suffix.empty()) {
        // Compressed (.gz) and kubelet's temporary files are never read.
        if (suffix[0] != '.' || !rotation_stamp(suffix.substr(1)))
            return bad("file '" + std::string(file) + "' is neither <n>.log nor rotated <n>.log.<YYYYmmdd-HHMMSS>");
        p.rotated = true;
    }
    return p;
}

}  // namespace jobtrail::shipper
