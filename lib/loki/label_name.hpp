#pragma once

#include <cstddef>
#include <string_view>

namespace jobtrail::loki {

// Label names Loki accepts: [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (__name__ and the like
// are Loki's own); Loki refuses a push, every line of the stream, with any other. Header-only:
// config parsing checks names without linking the push client.
inline bool valid_label_name(std::string_view n) {
    if (n.empty() || (n.size() >= 2 && n[0] == '_' && n[1] == '_')) return false;
    for (size_t i = 0; i < n.size(); ++i) {
        const char c = n[i];
        const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
    }
    return true;
}

}  // namespace jobtrail::loki
