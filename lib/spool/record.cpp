#include "spool/record.hpp"

#include <array>
#include <cstring>

namespace jobtrail::spool {
namespace {

constexpr std::array<uint32_t, 256> make_crc_table() {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
        t[i] = c;
    }
    return t;
}
constexpr auto kCrcTable = make_crc_table();
constexpr char kMagic[4] = {'J', 'T', 'R', '1'};

void put_u32(std::string& out, uint32_t v) {
    for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

uint32_t get_u32(std::string_view in, size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
    return v;
}

void put_varint(std::string& out, uint64_t v) {
    while (v >= 0x80) {
        out += static_cast<char>((v & 0x7f) | 0x80);
        v >>= 7;
    }
    out += static_cast<char>(v);
}

bool get_varint(std::string_view in, size_t& pos, uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (pos >= in.size()) return false;
        const auto b = static_cast<unsigned char>(in[pos++]);
        v |= static_cast<uint64_t>(b & 0x7f) << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

void put_bytes(std::string& out, std::string_view s) {
    put_varint(out, s.size());
    out.append(s);
}

bool get_bytes(std::string_view in, size_t& pos, std::string& out) {
    uint64_t n = 0;
    if (!get_varint(in, pos, n) || n > in.size() - pos) return false;
    out.assign(in.substr(pos, n));
    pos += n;
    return true;
}

}  // namespace

uint32_t crc32(std::string_view data) {
    uint32_t c = 0xffffffffu;
    for (unsigned char b : data) c = kCrcTable[(c ^ b) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

void append_frame(std::string& out, const Record& r) {
    // The payload is written in place after a header whose length and CRC are filled in last.
    const size_t start = out.size();
    out.append(kMagic, 4);
    out.append(8, '\0');
    out += '\x01';  // payload version
    put_varint(out, static_cast<uint64_t>(r.ts_ns));
    put_bytes(out, r.stream);
    put_bytes(out, r.line);
    put_varint(out, r.metadata.size());
    for (const auto& [k, v] : r.metadata) {
        put_bytes(out, k);
        put_bytes(out, v);
    }
    const size_t len = out.size() - start - kFrameHeader;
    std::string header;
    put_u32(header, static_cast<uint32_t>(len));
    put_u32(header, crc32(std::string_view(out).substr(start + kFrameHeader, len)));
    out.replace(start + 4, 8, header);
}

DecodeStatus decode_frame(std::string_view in, Record& out, size_t* consumed, std::string* why) {
    auto corrupt = [&](const char* w) {
        if (why) *why = w;
        return DecodeStatus::kCorrupt;
    };
    if (in.size() < kFrameHeader) return DecodeStatus::kNeedMore;
    if (std::memcmp(in.data(), kMagic, 4) != 0) return corrupt("bad magic");
    const uint32_t len = get_u32(in, 4);
    if (len == 0 || len > kMaxPayload) return corrupt("bad length");
    if (in.size() - kFrameHeader < len) return DecodeStatus::kNeedMore;
    const std::string_view payload = in.substr(kFrameHeader, len);
    if (crc32(payload) != get_u32(in, 8)) return corrupt("checksum mismatch");
    size_t pos = 0;
    if (payload[pos++] != '\x01') return corrupt("unknown payload version");
    uint64_t ts = 0, n = 0;
    Record r;
    if (!get_varint(payload, pos, ts) || !get_bytes(payload, pos, r.stream) || !get_bytes(payload, pos, r.line) ||
        !get_varint(payload, pos, n) || n > len)
        return corrupt("malformed payload");
    r.ts_ns = static_cast<int64_t>(ts);
    for (uint64_t i = 0; i < n; ++i) {
        std::string k, v;
        if (!get_bytes(payload, pos, k) || !get_bytes(payload, pos, v)) return corrupt("malformed metadata");
        r.metadata.emplace_back(std::move(k), std::move(v));
    }
    if (pos != payload.size()) return corrupt("trailing bytes in payload");
    out = std::move(r);
    *consumed = kFrameHeader + len;
    return DecodeStatus::kOk;
}

}  // namespace jobtrail::spool
