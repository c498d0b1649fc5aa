#include "shipper/sources/file/cri.hpp"

#include <algorithm>

#include "common/time.hpp"

namespace jobtrail::shipper::cri {
namespace {

constexpr std::array<std::string_view, 2> kStreams = {"stdout", "stderr"};

size_t slot_of(std::string_view stream) {
    return stream == kStreams[0] ? 0 : 1;
}

}  // namespace

std::optional<Line> parse(std::string_view text) {
    const size_t a = text.find(' ');
    if (a > 64) return std::nullopt;  // RFC 3339 times are short (and npos: no space at all)
    const size_t b = text.find(' ', a + 1);
    if (b == std::string_view::npos) return std::nullopt;
    Line l;
    l.stream = text.substr(a + 1, b - a - 1);
    if (l.stream != kStreams[0] && l.stream != kStreams[1]) return std::nullopt;
    // The tags, ':'-separated, the first P or F; the message may be empty (and its space absent).
    size_t c = text.find(' ', b + 1);
    const std::string_view tags = text.substr(b + 1, c == std::string_view::npos ? c : c - b - 1);
    const std::string_view first = tags.substr(0, tags.find(':'));
    if (first != "P" && first != "F") return std::nullopt;
    const auto ts = parse_rfc3339_ns(text.substr(0, a));
    if (!ts) return std::nullopt;
    l.ts_ns = *ts;
    l.partial = first == "P";
    l.message = c == std::string_view::npos ? std::string_view() : text.substr(c + 1);
    return l;
}

void Joiner::hand_out(Slot& s, std::string_view stream, bool cut, std::vector<Joined>& out) {
    out.push_back({std::move(s.text), s.ts_ns, std::string(stream), cut});
    s = Slot{};
}

void Joiner::feed(const Line& l, uint64_t offset, std::vector<Joined>& out) {
    const size_t i = slot_of(l.stream);
    Slot& s = slots_[i];
    if (s.holding && s.text.size() + l.message.size() > max_) hand_out(s, kStreams[i], true, out);
    if (!s.holding) {
        s.holding = true;
        s.start = offset;
    }
    // One piece longer than the bound by itself (the runtime cuts at 16KiB; a file may not):
    // handed out as it is, the caller truncates it like any long line.
    s.text.append(l.message);
    s.ts_ns = l.ts_ns;
    if (!l.partial || s.text.size() >= max_) hand_out(s, kStreams[i], l.partial, out);
}

void Joiner::take_all(std::vector<Joined>& out) {
    for (size_t i = 0; i < slots_.size(); ++i)
        if (slots_[i].holding) hand_out(slots_[i], kStreams[i], true, out);
}

uint64_t Joiner::resume_offset(uint64_t done) const {
    uint64_t at = done;
    for (const auto& s : slots_)
        if (s.holding) at = std::min(at, s.start);
    return at;
}

void Joiner::clear() {
    slots_ = {};
    replay_done_ = 0;
}

std::array<int64_t, 2> Joiner::held_starts() const {
    std::array<int64_t, 2> out{-1, -1};
    for (size_t i = 0; i < slots_.size(); ++i)
        if (slots_[i].holding) out[i] = static_cast<int64_t>(slots_[i].start);
    return out;
}

void Joiner::replay(uint64_t done, std::array<int64_t, 2> starts) {
    replay_done_ = done;
    replay_starts_ = starts;
}

bool Joiner::replayed(const Line* l, uint64_t offset) {
    if (offset >= replay_done_) return false;
    if (l == nullptr) return true;
    const int64_t start = replay_starts_[slot_of(l->stream)];
    return start < 0 || offset < static_cast<uint64_t>(start);
}

}  // namespace jobtrail::shipper::cri
