#include "spool/record.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "common/crc32.hpp"
#include "common/varint.hpp"

namespace jobtrail::spool {
namespace {

constexpr char kMagic[4] = {'J', 'T', 'R', '1'};

uint32_t get_u32(std::string_view in, size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
    return v;
}

char* put_varint(char* p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = static_cast<char>((v & 0x7f) | 0x80);
        v >>= 7;
    }
    *p++ = static_cast<char>(v);
    return p;
}

// At most ten bytes (the tenth gives bit 63). Inlined; lengths of one or two bytes first, and
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

size_t pairs_size(const RecordRef::Metadata& md) {
    size_t len = 0;
    for (const auto& [k, v] : md) len += varint_size(k.size()) + k.size() + varint_size(v.size()) + v.size();
    return len;
}

char* put_pairs(char* p, const RecordRef::Metadata& md) {
    for (const auto& [k, v] : md) {
        p = put_bytes(p, k);
        p = put_bytes(p, v);
    }
    return p;
}

size_t metadata_size(const RecordRef& r, size_t* count) {
    *count = (r.shared ? r.shared->size() : 0) + (r.own ? r.own->size() : 0);
    size_t len = varint_size(*count);
    if (r.shared) len += r.shared_wire.empty() ? pairs_size(*r.shared) : r.shared_wire.size();
    if (r.own) len += pairs_size(*r.own);
    return len;
}

char* put_metadata(char* p, const RecordRef& r, size_t count) {
    p = put_varint(p, count);
    if (r.shared) {
        if (r.shared_wire.empty()) {
            p = put_pairs(p, *r.shared);
        } else {
            std::memcpy(p, r.shared_wire.data(), r.shared_wire.size());
            p += r.shared_wire.size();
        }
    }
    if (r.own) p = put_pairs(p, *r.own);
    return p;
}

void put_header(char* h, size_t len) {
    const uint32_t crc = crc32(std::string_view(h + kFrameHeader, len));
    std::memcpy(h, kMagic, 4);
    for (int i = 0; i < 4; ++i) {
        h[4 + i] = static_cast<char>((len >> (8 * i)) & 0xff);
        h[8 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
    }
}

// line | n | n x (key | value): the rest of a record after its timestamp (and, alone in a
// frame, its stream).
bool get_line_and_metadata(std::string_view payload, size_t& pos, RecordView& out,
                           std::vector<MetadataView>& metadata) {
    uint64_t n = 0;
    if (!get_bytes(payload, pos, out.line) || !get_varint(payload, pos, n) || n > payload.size()) return false;
    out.metadata_begin = static_cast<uint32_t>(metadata.size());
    out.metadata_count = static_cast<uint32_t>(n);
    for (uint64_t i = 0; i < n; ++i) {
        MetadataView kv;
        if (!get_bytes(payload, pos, kv.first) || !get_bytes(payload, pos, kv.second)) return false;
        metadata.push_back(kv);
    }
    return true;
}

bool get_ts(std::string_view payload, size_t& pos, RecordView& out) {
    uint64_t ts = 0;
    if (!get_varint(payload, pos, ts)) return false;
    out.ts_ns = static_cast<int64_t>(ts);
    return true;
}

}  // namespace

std::string encode_metadata(const RecordRef::Metadata& md) {
    std::string out(pairs_size(md), '\0');
    put_pairs(out.data(), md);
    return out;
}

void append_frame(std::string& out, const RecordRef& r) {
    // Sized first, then written through a pointer: appending byte by byte (a capacity check per
    // varint byte) was an eighth of the shipper's instructions.
    size_t count = 0;
    const size_t len = 1 + varint_size(static_cast<uint64_t>(r.ts_ns)) + varint_size(r.stream.size()) +
                       r.stream.size() + varint_size(r.line.size()) + r.line.size() + metadata_size(r, &count);
    const size_t start = out.size();
    out.resize(start + kFrameHeader + len);
    char* p = out.data() + start + kFrameHeader;
    *p++ = '\x01';  // payload version
    p = put_varint(p, static_cast<uint64_t>(r.ts_ns));
    p = put_bytes(p, r.stream);
    p = put_bytes(p, r.line);
    put_metadata(p, r, count);
    put_header(out.data() + start, len);
}

void append_frame(std::string& out, const Record& r) {
    append_frame(out, RecordRef{r.ts_ns, r.stream, r.line, &r.metadata, nullptr});
}

size_t run_header_size(std::string_view stream) {
    return kFrameHeader + 1 + varint_size(stream.size()) + stream.size();
}

size_t run_record_size(const RecordRef& r) {
    size_t count = 0;
    return varint_size(static_cast<uint64_t>(r.ts_ns)) + varint_size(r.line.size()) + r.line.size() +
           metadata_size(r, &count);
}

size_t begin_run(std::string& out, std::string_view stream) {
    const size_t start = out.size();
    out.resize(start + run_header_size(stream));
    char* p = out.data() + start + kFrameHeader;
    *p++ = '\x02';  // payload version: a run
    put_bytes(p, stream);
    return start;
}

void append_to_run(std::string& out, const RecordRef& r) {
    append_to_run(out, r, run_record_size(r));
}

void append_to_run(std::string& out, const RecordRef& r, size_t size) {
    const size_t at = out.size();
    out.resize(at + size);
    char* p = put_varint(out.data() + at, static_cast<uint64_t>(r.ts_ns));
    p = put_bytes(p, r.line);
    put_metadata(p, r, (r.shared ? r.shared->size() : 0) + (r.own ? r.own->size() : 0));
}

void end_run(std::string& out, size_t start) {
    put_header(out.data() + start, out.size() - start - kFrameHeader);
}

void append_run(std::string& out, const std::vector<Record>& records) {
    const size_t start = begin_run(out, records.front().stream);
    for (const auto& r : records) append_to_run(out, RecordRef{r.ts_ns, r.stream, r.line, &r.metadata, nullptr});
    end_run(out, start);
}

DecodeStatus decode_frame(std::string_view in, std::vector<RecordView>& out, std::vector<MetadataView>& metadata,
                          size_t* consumed, std::string* why, int* version) {
    const size_t out_start = out.size(), md_start = metadata.size();
    auto corrupt = [&](const char* w) {
        out.resize(out_start);
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
    size_t pos = 1;
    if (payload[0] == '\x01') {
        RecordView v;
        if (!get_ts(payload, pos, v) || !get_bytes(payload, pos, v.stream) ||
            !get_line_and_metadata(payload, pos, v, metadata))
            return corrupt("malformed payload");
        out.push_back(v);
    } else if (payload[0] == '\x02') {
        std::string_view stream;
        if (!get_bytes(payload, pos, stream)) return corrupt("malformed payload");
        if (pos == payload.size()) return corrupt("a run without records");
        while (pos < payload.size()) {
            RecordView v;
            v.stream = stream;
            if (!get_ts(payload, pos, v) || !get_line_and_metadata(payload, pos, v, metadata))
                return corrupt("malformed record in a run");
            out.push_back(v);
        }
    } else {
        return corrupt("unknown payload version");
    }
    if (pos != payload.size()) return corrupt("trailing bytes in payload");
    if (version) *version = static_cast<unsigned char>(payload[0]);
    *consumed = kFrameHeader + len;
    return DecodeStatus::kOk;
}

DecodeStatus decode_frame(std::string_view in, std::vector<Record>& out, size_t* consumed, std::string* why,
                          int* version) {
    std::vector<RecordView> v;
    std::vector<MetadataView> md;
    const DecodeStatus st = decode_frame(in, v, md, consumed, why, version);
    if (st != DecodeStatus::kOk) return st;
    out.resize(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
        Record& r = out[i];
        r.ts_ns = v[i].ts_ns;
        r.stream.assign(v[i].stream);
        r.line.assign(v[i].line);
        r.metadata.resize(v[i].metadata_count);
        for (uint32_t k = 0; k < v[i].metadata_count; ++k) {
            r.metadata[k].first.assign(md[v[i].metadata_begin + k].first);
            r.metadata[k].second.assign(md[v[i].metadata_begin + k].second);
        }
    }
    return st;
}

}  // namespace jobtrail::spool
