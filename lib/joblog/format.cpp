#include "joblog/format.hpp"

#include "common/text.hpp"
#include "common/time.hpp"

namespace jobtrail::joblog {

std::string tag_name(std::string_view name) {
    std::string out = escape_line(name);
    for (char& c : out)
        if (c == ' ' || c == '[' || c == ']' || c == '\t') c = '_';
    return out;
}

void append_line(std::string& out, int64_t ts_ns, std::string_view tag, std::string_view name, std::string_view text) {
    out += format_rfc3339_ns(ts_ns);
    out += ' ';
    out += tag;
    if (!name.empty()) {
        out += '[';
        out += tag_name(name);
        out += ']';
    }
    out += ' ';
    append_escaped(out, text);
    out += '\n';
}

bool parse_line(std::string_view line, Line& out) {
    const size_t sp1 = line.find(' ');
    if (sp1 == std::string_view::npos) return false;
    auto ts = parse_rfc3339_ns(line.substr(0, sp1));
    if (!ts) return false;
    std::string_view rest = line.substr(sp1 + 1);
    const size_t sp2 = rest.find(' ');
    std::string_view tag = rest.substr(0, sp2);
    out.text = sp2 == std::string_view::npos ? std::string_view{} : rest.substr(sp2 + 1);
    out.name = {};
    if (const size_t br = tag.find('['); br != std::string_view::npos) {
        if (tag.back() != ']' || br + 2 > tag.size()) return false;
        out.name = tag.substr(br + 1, tag.size() - br - 2);
        tag = tag.substr(0, br);
    }
    if (tag.empty() || tag[0] < 'a' || tag[0] > 'z') return false;
    for (char c : tag)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
    out.ts_ns = *ts;
    out.tag = tag;
    return true;
}

}  // namespace jobtrail::joblog
