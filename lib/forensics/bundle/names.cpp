#include "forensics/bundle/names.hpp"

#include <openssl/evp.h>

#include <cctype>

#include "common/time.hpp"
#include "forensics/bundle.hpp"

namespace jobtrail::forensics {

namespace bundle {

bool clean_relative_path(std::string_view rel) {
    if (rel.empty() || rel.size() > 1024) return false;
    size_t at = 0;
    while (true) {
        const size_t slash = rel.find('/', at);
        const std::string_view c = rel.substr(at, slash == std::string_view::npos ? rel.npos : slash - at);
        if (c.empty() || c == "." || c == ".." || c.size() > 255) return false;
        for (const char ch : c)
            if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f || ch == '\\') return false;
        if (slash == std::string_view::npos) return true;
        at = slash + 1;
    }
}

std::string utc_stamp(int64_t ns) {
    std::string s = format_rfc3339_ns(ns);  // 2026-11-29T21:52:22.146801327Z
    return s.substr(0, 4) + s.substr(5, 2) + s.substr(8, 2) + "T" + s.substr(11, 2) + s.substr(14, 2) +
           s.substr(17, 2) + "Z";
}

}  // namespace bundle

std::string path_component(std::string_view v) {
    static const char* hex = "0123456789ABCDEF";
    if (v.empty()) return "~empty";
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) {
        const auto c = static_cast<unsigned char>(v[i]);
        if ((std::isalnum(c) && c < 0x80) || c == '-' || c == '_' || (c == '.' && i > 0)) {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    constexpr size_t kMax = 128, kKeep = 96;
    if (out.size() <= kMax) return out;
    // '~' is never in an uncut name: a cut one cannot collide with one.
    size_t keep = kKeep;  // not inside a %XX
    if (out[keep - 1] == '%')
        keep -= 1;
    else if (out[keep - 2] == '%')
        keep -= 2;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(v.data(), v.size(), md, &n, EVP_sha256(), nullptr);
    out.resize(keep);
    out += '~';
    for (unsigned int i = 0; i < 8; ++i) {
        out += hex[md[i] >> 4];
        out += hex[md[i] & 15];
    }
    return out;
}

}  // namespace jobtrail::forensics
