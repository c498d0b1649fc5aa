#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

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

static_assert(varint_size(0) == 1 && varint_size(127) == 1 && varint_size(128) == 2 && varint_size(16383) == 2 &&
              varint_size(16384) == 3 && varint_size(UINT64_MAX >> 1) == 9 && varint_size(UINT64_MAX) == 10);

}  // namespace jobtrail
