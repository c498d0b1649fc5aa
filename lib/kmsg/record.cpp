#include "kmsg/record.hpp"

#include <algorithm>
#include <charconv>

#include "common/text.hpp"
#include "common/time.hpp"

namespace jobtrail::kmsg {
namespace {

bool parse_u64(std::string_view s, uint64_t& out) {
    if (s.empty()) return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

std::string_view Record::dict_value(std::string_view key) const {
    for (const auto& [k, v] : dict)
        if (k == key) return v;
    return {};
}

bool parse_header(std::string_view raw, uint64_t& seq, uint64_t& usec) {
    const size_t semi = raw.find(';');
    if (semi == std::string_view::npos) return false;
    std::string_view h = raw.substr(0, semi);
    const size_t c1 = h.find(',');
    if (c1 == std::string_view::npos) return false;
    const size_t c2 = h.find(',', c1 + 1);
    if (c2 == std::string_view::npos) return false;
    size_t c3 = h.find(',', c2 + 1);
    if (c3 == std::string_view::npos) c3 = h.size();
    return parse_u64(h.substr(c1 + 1, c2 - c1 - 1), seq) && parse_u64(h.substr(c2 + 1, c3 - c2 - 1), usec);
}

bool parse_record(std::string_view raw, Record& out, ParseError& err) {
    out = Record{};
    const size_t semi = raw.find(';');
    const size_t nl = raw.find('\n');
    if (semi == std::string_view::npos || (nl != std::string_view::npos && nl < semi)) {
        err = {"no ';' between header and message", std::min(raw.size(), nl)};
        return false;
    }
    std::string_view header = raw.substr(0, semi);
    std::string_view fields[4];
    size_t nfields = 0;
    size_t start = 0;
    while (nfields < 4) {
        const size_t comma = header.find(',', start);
        const size_t end = comma == std::string_view::npos ? header.size() : comma;
        fields[nfields++] = header.substr(start, end - start);
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    if (nfields < 4) {
        err = {"header has " + std::to_string(nfields) + " fields, expected prio,seq,usec,flags", header.size()};
        return false;
    }
    uint64_t prio = 0;
    // The kernel keeps the facility in a u8, so prio <= 255 << 3 | 7; a larger one would
    // otherwise wrap to facility 0 and pass for the kernel's own record.
    if (!parse_u64(fields[0], prio) || prio > 2047) {
        err = {"priority is not a number", 0};
        return false;
    }
    if (!parse_u64(fields[1], out.seq)) {
        err = {"sequence number is not a number", static_cast<size_t>(fields[1].data() - raw.data())};
        return false;
    }
    if (!parse_u64(fields[2], out.usec)) {
        err = {"timestamp is not a number", static_cast<size_t>(fields[2].data() - raw.data())};
        return false;
    }
    out.facility = static_cast<uint8_t>(prio >> 3);
    out.level = static_cast<uint8_t>(prio & 7);
    out.flag = fields[3].empty() ? '-' : fields[3][0];

    std::string_view rest = raw.substr(semi + 1);
    const size_t eol = rest.find('\n');
    out.message = unescape_hex(rest.substr(0, eol));
    if (eol == std::string_view::npos) return true;
    rest.remove_prefix(eol + 1);
    // Continuation lines: " KEY=value"; anything else after the message is ignored.
    while (!rest.empty()) {
        const size_t e = rest.find('\n');
        std::string_view line = rest.substr(0, e);
        rest.remove_prefix(e == std::string_view::npos ? rest.size() : e + 1);
        if (line.empty() || line[0] != ' ') continue;
        line.remove_prefix(1);
        const size_t eq = line.find('=');
        if (eq == std::string_view::npos || eq == 0) continue;
        out.dict.emplace_back(std::string(line.substr(0, eq)), unescape_hex(line.substr(eq + 1)));
    }
    return true;
}

std::string format_header_line(const Record& r, int64_t wall_ns) {
    std::string s = std::to_string(r.prio());
    s += ',';
    s += std::to_string(r.seq);
    s += ',';
    s += std::to_string(r.usec);
    s += ',';
    s += r.flag;
    if (wall_ns) {
        s += ",time=";
        s += format_rfc3339_ns(wall_ns);
    }
    s += ';';
    // As /dev/kmsg prints it: a backslash too is \x5c, so that text a user put in the message
    // ("\x0a" typed as four characters) reads back as itself, not as what it spells.
    std::string_view m = r.message;
    for (size_t at; (at = m.find('\\')) != std::string_view::npos; m.remove_prefix(at + 1)) {
        append_escaped(s, m.substr(0, at));
        s += "\\x5c";
    }
    append_escaped(s, m);
    return s;
}

std::optional<int64_t> header_line_time(std::string_view line) {
    const std::string_view header = line.substr(0, line.find(';'));
    if (header.size() == line.size()) return std::nullopt;  // no ';': not a record line
    size_t at = 0;
    for (int field = 0; at <= header.size(); ++field) {
        const size_t comma = std::min(header.find(',', at), header.size());
        const std::string_view f = header.substr(at, comma - at);
        if (field >= 4 && f.substr(0, 5) == "time=") return parse_rfc3339_ns(f.substr(5));
        at = comma + 1;
    }
    return std::nullopt;
}

const char* level_name(uint8_t level) {
    static constexpr const char* kNames[] = {"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"};
    return kNames[level & 7];
}

}  // namespace jobtrail::kmsg
