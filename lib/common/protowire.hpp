#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "common/varint.hpp"

// Protobuf's wire format as the push request (lib/loki/push.cpp) and the spool's compressed runs
// (lib/spool/record.cpp) write it, so a run's entries are the request's bytes: length-delimited
// fields (wire type 2, one-byte tags) for strings and embedded messages; proto3 leaves out empty
// strings. Written into buffers sized beforehand.
namespace jobtrail::protowire {

constexpr size_t field_size(size_t payload) {
    return 1 + varint_size(payload) + payload;
}
constexpr size_t string_field_size(size_t len) {
    return len ? field_size(len) : 0;
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

}  // namespace jobtrail::protowire
