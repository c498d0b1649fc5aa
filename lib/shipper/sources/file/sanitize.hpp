#pragma once

#include <string>
#include <string_view>

namespace jobtrail::shipper {

// A file's line turned into a Loki line: invalid UTF-8 becomes U+FFFD and NUL bytes show as \x00.
// Into `out`, keeping its buffer (a recycled line's).
void sanitize_line(std::string_view bytes, std::string& out);
std::string sanitize_line(std::string_view bytes);

}  // namespace jobtrail::shipper
