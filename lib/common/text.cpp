#include "common/text.hpp"

namespace jobtrail {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void put_hex(std::string& out, unsigned char c) {
    out += '\\';
    out += 'x';
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
}

// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is not valid.
size_t utf8_len(std::string_view s, size_t i) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    unsigned min = 0;
    if (b0 >= 0xc2 && b0 <= 0xdf) {
        n = 2;
        min = 0x80;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
        n = 3;
        min = 0x800;
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
        n = 4;
        min = 0x10000;
    } else {
        return 0;
    }
    if (i + n > s.size()) return 0;
    unsigned cp = b0 & (0xff >> (n + 1));
    for (size_t k = 1; k < n; ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        if ((b & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (b & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return n;
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

void append_escaped(std::string& out, std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            if ((c < 0x20 && c != '\t') || c == 0x7f) {
                put_hex(out, c);
            } else {
                out += static_cast<char>(c);
            }
            ++i;
            continue;
        }
        const size_t n = utf8_len(s, i);
        if (n == 0) {
            put_hex(out, c);
            ++i;
        } else {
            out.append(s.substr(i, n));
            i += n;
        }
    }
}

std::string escape_line(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    append_escaped(out, bytes);
    return out;
}

std::string unescape_hex(std::string_view t) {
    std::string out;
    out.reserve(t.size());
    for (size_t i = 0; i < t.size(); ++i) {
        if (t[i] == '\\' && i + 3 < t.size() && t[i + 1] == 'x') {
            const int hi = hex_value(t[i + 2]);
            const int lo = hex_value(t[i + 3]);
            if (hi >= 0 && lo >= 0) {
                out += static_cast<char>((hi << 4) | lo);
                i += 3;
                continue;
            }
        }
        out += t[i];
    }
    return out;
}

std::string_view utf8_prefix(std::string_view s, size_t max) {
    if (s.size() <= max) return s;
    size_t end = max;
    // Step back over continuation bytes so a multi-byte character is not cut in half.
    while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xc0) == 0x80) --end;
    return s.substr(0, end);
}

bool starts_with(std::string_view s, std::string_view prefix) {
    return s.substr(0, prefix.size()) == prefix;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
        s.remove_suffix(1);
    return s;
}

}  // namespace jobtrail

namespace jobtrail {
std::string logfmt_value(std::string_view v) {
    bool plain = !v.empty();
    for (char c : v)
        if (c == ' ' || c == '"' || c == '=' || c == '\\' || c == '\t') plain = false;
    if (plain) return escape_line(v);
    std::string out = "\"";
    for (char c : v) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    out += '"';
    return escape_line(out);
}
std::string redact_url_credentials(std::string_view s) {
    const size_t scheme = s.find("://");
    if (scheme == std::string_view::npos) return std::string(s);
    const size_t at = s.find('@', scheme + 3), slash = s.find('/', scheme + 3);
    if (at == std::string_view::npos || (slash != std::string_view::npos && at > slash)) return std::string(s);
    return std::string(s.substr(0, scheme + 3)) + "<redacted>@" + std::string(s.substr(at + 1));
}

void append_quoted(std::string& out, std::string_view v) {
    out += '"';
    for (const char c : v) {
        if (c == '\\' || c == '"') {
            out += '\\';
            out += c;
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out += c;
        }
    }
    out += '"';
}

std::string_view logfmt_field(std::string_view text, std::string_view key) {
    // Left to right, pair by pair: a key inside a quoted value is part of that value.
    size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && text[i] == ' ') ++i;
        const size_t k = i;
        while (i < text.size() && text[i] != '=' && text[i] != ' ') ++i;
        const std::string_view name = text.substr(k, i - k);
        if (i >= text.size() || text[i] != '=') continue;
        ++i;
        std::string_view value;
        if (i < text.size() && text[i] == '"') {
            const size_t from = ++i;
            while (i < text.size() && text[i] != '"') i += (text[i] == '\\' && i + 1 < text.size()) ? 2 : 1;
            value = text.substr(from, std::min(i, text.size()) - from);
            ++i;
        } else {
            const size_t from = i;
            while (i < text.size() && text[i] != ' ') ++i;
            value = text.substr(from, i - from);
        }
        if (name == key) return value;
    }
    return {};
}

}  // namespace jobtrail
