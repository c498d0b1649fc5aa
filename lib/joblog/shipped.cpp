#include "joblog/shipped.hpp"

#include "node/layout.hpp"

namespace jobtrail::joblog {

std::string make_shipped_line(std::string_view phase, std::string_view tag, std::string_view name,
                              std::string_view text) {
    std::string out;
    out.reserve(phase.size() + tag.size() + name.size() + text.size() + 4);
    if (!phase.empty()) {
        out += phase;
        out += ' ';
    }
    out += tag;
    if (!name.empty()) {
        out += '[';
        out += name;
        out += ']';
    }
    out += ' ';
    out += text;
    return out;
}

ShippedLine parse_shipped_line(std::string_view line, std::string_view phase) {
    ShippedLine out;
    const std::string_view first = line.substr(0, line.find(' '));
    node::Phase known;
    if (first.size() < line.size() && (phase.empty() ? node::parse_phase(first, known) : first == phase)) {
        out.phase = first;
        line.remove_prefix(first.size() + 1);
    }
    const size_t sp = line.find(' ');
    const std::string_view full = line.substr(0, sp);
    out.text = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
    const size_t br = full.find('[');
    out.tag = full.substr(0, br);
    if (br != std::string_view::npos && full.back() == ']') out.name = full.substr(br + 1, full.size() - br - 2);
    return out;
}

std::string shipped_tags_pattern(std::initializer_list<std::string_view> tags) {
    std::string out = "^(";
    out += node::phase_name(node::Phase::kProlog);
    out += '|';
    out += node::phase_name(node::Phase::kEpilog);
    out += ") (";
    for (const auto t : tags) {
        if (out.back() != '(') out += '|';
        out += t;
    }
    out += ')';
    return out;
}

}  // namespace jobtrail::joblog
