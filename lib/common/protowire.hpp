#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "common/varint.hpp"

// Protobuf's wire format as Loki's entries are written and read (lib/loki/entry_wire.hpp, for the
// push request and the spool's compressed runs alike) and the push request around them: length-
// delimited fields (wire type 2, one-byte tags) for strings and embedded messages; proto3 leaves
// out empty strings. Written into buffers sized beforehand.
namespace jobtrail::protowire {

constexpr size_t field_size(size_t payload) {
    return 1 + varint_size(payload) + payload;
}
constexpr size_t string_field_size(size_t len) {
    return len ? field_size(len) : 0;
}
// The payload's size of a field of `field` bytes: field_size's inverse.
constexpr size_t payload_size(size_t field) {
    size_t len = field - 2;
    while (field_size(len) > field) --len;
    return len;
}
inline char* put_tag_len(char* p, int field, size_t len) {
    *p++ = static_cast<char>((field << 3) | 2);
    return put_varint(p, len);
}
inline char* put_string(char* p, int field, std::string_view s) {
    if (s.empty()) return p;
    p = put_tag_len(p, field, s.size());
    std::memcpy(p, s.data(), s.size());
    return p + s.size();
}

// Reads field `field` (length-delimited) at pos if it is there: *present says whether it was;
// false only if it is there and malformed.
inline bool get_field(std::string_view in, size_t& pos, int field, std::string_view& out, bool& present) {
    present = pos < in.size() && static_cast<unsigned char>(in[pos]) == ((field << 3) | 2);
    if (!present) return true;
    ++pos;
    return get_bytes(in, pos, out);
}

}  // namespace jobtrail::protowire
