#include "spool/record.hpp"

#include <algorithm>
#include <cstring>

#include "common/crc32.hpp"

namespace jobtrail::spool {
namespace {

constexpr char kMagic[4] = {'J', 'T', 'R', '1'};

uint32_t get_u32(std::string_view in, size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
    return v;
}

size_t varint_size(uint64_t v) {
    size_t n = 1;
    for (; v >= 0x80; v >>= 7) ++n;
    return n;
}

char* put_varint(char* p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = static_cast<char>((v & 0x7f) | 0x80);
        v >>= 7;
    }
    *p++ = static_cast<char>(v);
    return p;
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

char* put_bytes(char* p, std::string_view s) {
    p = put_varint(p, s.size());
    if (!s.empty()) std::memcpy(p, s.data(), s.size());
    return p + s.size();
}

bool get_bytes(std::string_view in, size_t& pos, std::string_view& out) {
    uint64_t n = 0;
    if (!get_varint(in, pos, n) || n > in.size() - pos) return false;
    out = in.substr(pos, n);
    pos += n;
    return true;
}

}  // namespace

void append_frame(std::string& out, const RecordRef& r) {
    // Sized first, then written through a pointer: appending byte by byte (a capacity check per
    // varint byte) was an eighth of the shipper's instructions.
    const auto bytes_size = [](std::string_view b) { return varint_size(b.size()) + b.size(); };
    const size_t count = (r.shared ? r.shared->size() : 0) + (r.own ? r.own->size() : 0);
    size_t len = 1 + varint_size(static_cast<uint64_t>(r.ts_ns)) + bytes_size(r.stream) + bytes_size(r.line) +
                 varint_size(count);
    for (const auto* md : {r.shared, r.own})
        if (md)
            for (const auto& [k, v] : *md) len += bytes_size(k) + bytes_size(v);
    const size_t start = out.size();
    out.resize(start + kFrameHeader + len);
    char* p = out.data() + start + kFrameHeader;
    *p++ = '\x01';  // payload version
    p = put_varint(p, static_cast<uint64_t>(r.ts_ns));
    p = put_bytes(p, r.stream);
    p = put_bytes(p, r.line);
    p = put_varint(p, count);
    for (const auto* md : {r.shared, r.own}) {
        if (!md) continue;
        for (const auto& [k, v] : *md) {
            p = put_bytes(p, k);
            p = put_bytes(p, v);
        }
    }
    char* h = out.data() + start;
    std::memcpy(h, kMagic, 4);
    const uint32_t crc = crc32(std::string_view(h + kFrameHeader, len));
    for (int i = 0; i < 4; ++i) {
        h[4 + i] = static_cast<char>((len >> (8 * i)) & 0xff);
        h[8 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
    }
}

void append_frame(std::string& out, const Record& r) {
    append_frame(out, RecordRef{r.ts_ns, r.stream, r.line, &r.metadata, nullptr});
}

DecodeStatus decode_frame(std::string_view in, RecordView& out, std::vector<MetadataView>& metadata, size_t* consumed,
                          std::string* why) {
    const size_t md_start = metadata.size();
    auto corrupt = [&](const char* w) {
        metadata.resize(md_start);
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
    if (!get_varint(payload, pos, ts) || !get_bytes(payload, pos, out.stream) || !get_bytes(payload, pos, out.line) ||
        !get_varint(payload, pos, n) || n > len)
        return corrupt("malformed payload");
    out.ts_ns = static_cast<int64_t>(ts);
    for (uint64_t i = 0; i < n; ++i) {
        MetadataView kv;
        if (!get_bytes(payload, pos, kv.first) || !get_bytes(payload, pos, kv.second))
            return corrupt("malformed metadata");
        metadata.push_back(kv);
    }
    if (pos != payload.size()) return corrupt("trailing bytes in payload");
    out.metadata_begin = static_cast<uint32_t>(md_start);
    out.metadata_count = static_cast<uint32_t>(n);
    *consumed = kFrameHeader + len;
    return DecodeStatus::kOk;
}

DecodeStatus decode_frame(std::string_view in, Record& out, size_t* consumed, std::string* why) {
    RecordView v;
    std::vector<MetadataView> md;
    const DecodeStatus st = decode_frame(in, v, md, consumed, why);
    if (st != DecodeStatus::kOk) return st;
    out.ts_ns = v.ts_ns;
    out.stream.assign(v.stream);
    out.line.assign(v.line);
    out.metadata.resize(md.size());
    for (size_t i = 0; i < md.size(); ++i) {
        out.metadata[i].first.assign(md[i].first);
        out.metadata[i].second.assign(md[i].second);
    }
    return st;
}

}  // namespace jobtrail::spool
