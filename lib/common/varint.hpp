#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace jobtrail {

// Bytes of v as a base-128 varint (protobuf's, and the spool's), from its highest bit: a loop
// over 7-bit groups was ~30 instructions for a nanosecond timestamp, several per line.
constexpr size_t varint_size(uint64_t v) {
    return (static_cast<size_t>(std::bit_width(v | 1)) + 6) / 7;
}

// Writes v as a varint at p; where it ends.
inline char* put_varint(char* p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = static_cast<char>((v & 0x7f) | 0x80);
        v >>= 7;
    }
    *p++ = static_cast<char>(v);
    return p;
}

// Reads the varint at pos in `in` into v and moves pos past it; false if it does not end within
// `in` or ten bytes (the tenth gives bit 63). Inlined; lengths of one or two bytes first, and
// for longer ones (a record's timestamp is nine bytes) eight bytes' seven-bit groups together.
[[gnu::always_inline]] inline bool get_varint(std::string_view in, size_t& pos, uint64_t& v) {
    if (pos >= in.size()) return false;
    const auto* p = reinterpret_cast<const unsigned char*>(in.data()) + pos;
    const size_t left = in.size() - pos;
    // Lengths: one byte or two.
    if (!(p[0] & 0x80)) {
        pos += 1;
        v = p[0];
        return true;
    }
    if (left >= 2 && !(p[1] & 0x80)) {
        pos += 2;
        v = (p[0] & 0x7fu) | (static_cast<uint64_t>(p[1]) << 7);
        return true;
    }
    size_t i = 0;
    uint64_t r = 0;
    if (left >= 8 && std::endian::native == std::endian::little) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        const uint64_t stops = ~w & 0x8080808080808080ULL;
        if (stops != 0) {
            // Bytes up to the first without its top bit; then 7-bit groups packed pairwise.
            const int len = std::countr_zero(stops) / 8 + 1;
            w &= len == 8 ? ~0ULL : (1ULL << (8 * len)) - 1;
            w = ((w & 0x7f007f007f007f00ULL) >> 1) | (w & 0x007f007f007f007fULL);
            w = ((w & 0x3fff00003fff0000ULL) >> 2) | (w & 0x00003fff00003fffULL);
            w = ((w & 0x0fffffff00000000ULL) >> 4) | (w & 0x000000000fffffffULL);
            pos += static_cast<size_t>(len);
            v = w;
            return true;
        }
        w = ((w & 0x7f007f007f007f00ULL) >> 1) | (w & 0x007f007f007f007fULL);
        w = ((w & 0x3fff00003fff0000ULL) >> 2) | (w & 0x00003fff00003fffULL);
        r = ((w & 0x0fffffff00000000ULL) >> 4) | (w & 0x000000000fffffffULL);
        i = 8;
    }
    for (const size_t n = std::min<size_t>(left, 10); i < n; ++i) {
        r |= static_cast<uint64_t>(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            pos += i + 1;
            v = r;
            return true;
        }
    }
    return false;
}

// Bytes behind their length as a varint (protobuf's length-delimited value; the spool's strings).
inline char* put_bytes(char* p, std::string_view s) {
    p = put_varint(p, s.size());
    if (!s.empty()) std::memcpy(p, s.data(), s.size());
    return p + s.size();
}
inline bool get_bytes(std::string_view in, size_t& pos, std::string_view& out) {
    uint64_t n = 0;
    if (!get_varint(in, pos, n) || n > in.size() - pos) return false;
    out = in.substr(pos, n);
    pos += n;
    return true;
}

static_assert(varint_size(0) == 1 && varint_size(127) == 1 && varint_size(128) == 2 && varint_size(16383) == 2 &&
              varint_size(16384) == 3 && varint_size(UINT64_MAX >> 1) == 9 && varint_size(UINT64_MAX) == 10);

}  // namespace jobtrail
