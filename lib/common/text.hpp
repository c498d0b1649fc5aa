#pragma once

#include <string>
#include <string_view>

namespace jobtrail {

// Makes arbitrary bytes safe for one line of a log file: invalid UTF-8, control characters
// (except TAB) and DEL become \xNN, the same escape the kernel uses in /dev/kmsg. Valid
// UTF-8 passes through unchanged.
std::string escape_line(std::string_view bytes);

// Appends escape_line(bytes) to out (avoids an allocation per line on hot paths).
void append_escaped(std::string& out, std::string_view bytes);

// Decodes \xNN escapes (as written by the kernel and by escape_line); other text is kept.
std::string unescape_hex(std::string_view text);

// Cuts s to at most max bytes without splitting a UTF-8 sequence.
std::string_view utf8_prefix(std::string_view s, size_t max);

bool starts_with(std::string_view s, std::string_view prefix);
// Appends v as a double-quoted string with \\, \" and \n escaped: a Prometheus label value, as
// in Loki's stream selectors, and a LogQL string literal alike.
void append_quoted(std::string& out, std::string_view v);
// "https://user:secret@loki:3100/x" -> "https://<redacted>@loki:3100/x"; other text unchanged.
std::string redact_url_credentials(std::string_view s);
std::string_view trim(std::string_view s);

}  // namespace jobtrail

namespace jobtrail {
// A logfmt value: bare if it has no spaces, quotes or '=', else double-quoted with \" and \\.
std::string logfmt_value(std::string_view v);
// The value of `key` in a logfmt text ("status=1 result=\"exit 1\""), unquoted; empty if absent.
std::string_view logfmt_field(std::string_view text, std::string_view key);
}  // namespace jobtrail
