#include "spool/record.hpp"

#include <snappy.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "common/crc32.hpp"
#include "common/protowire.hpp"
#include "common/varint.hpp"

namespace jobtrail::spool {
namespace {

constexpr char kMagic[4] = {'J', 'T', 'R', '1'};

uint32_t get_u32(std::string_view in, size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
    return v;
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
    if (r.shared) len += pairs_size(*r.shared);
    if (r.own) len += pairs_size(*r.own);
    return len;
}

char* put_metadata(char* p, const RecordRef& r, size_t count) {
    p = put_varint(p, count);
    if (r.shared) p = put_pairs(p, *r.shared);
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

// The entries of a compressed run: what lib/loki/push.cpp writes for an EntryAdapter, byte for
// byte (lib/loki/push_test.cpp checks a push of runs against libprotobuf).
using protowire::field_size;
using protowire::put_tag_len;
using protowire::string_field_size;
uint64_t ts_seconds(int64_t ts) {
    return static_cast<uint64_t>(ts / 1'000'000'000);
}
uint64_t ts_nanos(int64_t ts) {
    return static_cast<uint64_t>(ts % 1'000'000'000);
}
size_t ts_message_size(int64_t ts) {
    const uint64_t sec = ts_seconds(ts), nanos = ts_nanos(ts);
    return (sec ? 1 + varint_size(sec) : 0) + (nanos ? 1 + varint_size(nanos) : 0);
}
size_t pair_message_size(std::string_view k, std::string_view v) {
    return string_field_size(k.size()) + string_field_size(v.size());
}
template <typename F>
void for_pairs(const RecordRef& r, F&& f) {
    if (r.shared)
        for (const auto& [k, v] : *r.shared) f(std::string_view(k), std::string_view(v));
    if (r.own)
        for (const auto& [k, v] : *r.own) f(std::string_view(k), std::string_view(v));
}
size_t entry_message_size(const RecordRef& r) {
    size_t n = field_size(ts_message_size(r.ts_ns)) + string_field_size(r.line.size());
    for_pairs(r, [&](std::string_view k, std::string_view v) { n += field_size(pair_message_size(k, v)); });
    return n;
}
// Reads field `field` (length-delimited) at pos if it is there; false only if malformed.
bool get_field(std::string_view in, size_t& pos, int field, std::string_view& out, bool& present) {
    present = pos < in.size() && static_cast<unsigned char>(in[pos]) == ((field << 3) | 2);
    if (!present) return true;
    ++pos;
    return get_bytes(in, pos, out);
}

// One EntryAdapter, in exactly the form RunBuilder writes (anything else is not ours: corrupt).
bool get_entry(std::string_view e, RecordView& out, std::vector<MetadataView>& metadata, uint64_t& md_bytes) {
    size_t pos = 0;
    std::string_view ts, line;
    bool present = false;
    if (!get_field(e, pos, 1, ts, present) || !present) return false;
    uint64_t sec = 0, nanos = 0;
    size_t tp = 0;
    if (tp < ts.size() && ts[tp] == '\x08') {
        ++tp;
        if (!get_varint(ts, tp, sec) || sec == 0) return false;
    }
    if (tp < ts.size() && ts[tp] == '\x10') {
        ++tp;
        if (!get_varint(ts, tp, nanos) || nanos == 0) return false;
    }
    if (tp != ts.size()) return false;
    out.ts_ns = static_cast<int64_t>(sec * 1'000'000'000ULL + nanos);  // wraps as the split did
    if (ts_seconds(out.ts_ns) != sec || ts_nanos(out.ts_ns) != nanos) return false;
    if (!get_field(e, pos, 2, line, present) || (present && line.empty())) return false;
    out.line = line;
    out.metadata_begin = static_cast<uint32_t>(metadata.size());
    out.metadata_count = 0;
    while (pos < e.size()) {
        std::string_view kv;
        if (!get_field(e, pos, 3, kv, present) || !present) return false;
        size_t kp = 0;
        MetadataView m;
        bool kpresent = false, vpresent = false;
        if (!get_field(kv, kp, 1, m.first, kpresent) || (kpresent && m.first.empty())) return false;
        if (!get_field(kv, kp, 2, m.second, vpresent) || (vpresent && m.second.empty())) return false;
        if (kp != kv.size()) return false;
        metadata.push_back(m);
        ++out.metadata_count;
        md_bytes += m.first.size() + m.second.size();
    }
    return true;
}

uint64_t zigzag(int64_t v) {
    return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
int64_t unzigzag(uint64_t v) {
    return static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1));
}

}  // namespace

std::string_view RunView::elements() const {
    size_t pos = 0;
    uint64_t n = 0;
    get_varint(compressed, pos, n);
    return compressed.substr(pos);
}

size_t RunBuilder::frame_bound(std::string_view stream, size_t raw) {
    // Frame header, version, stream; count, line and metadata bytes, oldest ts, flags, raw size
    // at their longest; what snappy may write for raw bytes at most (its preamble included).
    return run_header_size(stream) + 5 + 10 + 10 + 10 + 1 + 10 + snappy::MaxCompressedLength(raw);
}

size_t RunBuilder::entry_size(const RecordRef& r) {
    return field_size(entry_message_size(r));
}

void RunBuilder::begin(std::string_view stream) {
    clear();
    open_ = true;
    stream_.assign(stream);
}

void RunBuilder::add(const RecordRef& r, size_t size) {
    // The entry's length from its field's size: size = 1 + varint_size(len) + len.
    size_t len = size - 2;
    while (1 + varint_size(len) + len > size) --len;
    const size_t need = raw_size_ + size;
    char* p =
        (need > raw_.capacity() ? raw_.grow(std::max(2 * raw_.capacity(), need), raw_size_) : raw_.data()) + raw_size_;
    const char* const end = p + size;
    p = put_tag_len(p, 2, len);                       // StreamAdapter.entries
    p = put_tag_len(p, 1, ts_message_size(r.ts_ns));  // EntryAdapter.timestamp
    if (const uint64_t sec = ts_seconds(r.ts_ns)) {
        *p++ = '\x08';
        p = put_varint(p, sec);
    }
    if (const uint64_t nanos = ts_nanos(r.ts_ns)) {
        *p++ = '\x10';
        p = put_varint(p, nanos);
    }
    p = protowire::put_string(p, 2, r.line);  // EntryAdapter.line
    bool any = false;
    for_pairs(r, [&](std::string_view k, std::string_view v) {
        p = put_tag_len(p, 3, pair_message_size(k, v));  // EntryAdapter.structuredMetadata
        p = protowire::put_string(p, 1, k);
        p = protowire::put_string(p, 2, v);
        metadata_bytes_ += k.size() + v.size();
        any = true;
    });
    if (p != end) std::abort();  // sized otherwise: a bug, not a record to keep
    raw_size_ += size;
    if (count_ == 0 || r.ts_ns < oldest_) oldest_ = r.ts_ns;
    ++count_;
    line_bytes_ += r.line.size();
    has_metadata_ = has_metadata_ || any;
}

void RunBuilder::clear() {
    open_ = false;
    raw_size_ = 0;
    count_ = 0;
    line_bytes_ = metadata_bytes_ = 0;
    oldest_ = 0;
    has_metadata_ = false;
    // A run grown for one huge record is not kept.
    if (raw_.capacity() > 1 << 20) raw_.release();
    if (compressed_.capacity() > 1 << 20) compressed_.release();
}

void RunBuilder::finish(std::string& out) {
    if (!open_) return;
    size_t clen = 0;
    snappy::RawCompress(raw_.data(), raw_size_, compressed_.reserve(snappy::MaxCompressedLength(raw_size_)), &clen);
    // Appended, not resized into: a std::string zero-fills what it grows by.
    char head[kFrameHeader + 1 + 10 + 5 + 10 + 10 + 10 + 1 + 10];
    std::memset(head, 0, kFrameHeader);  // put_header() fills it in the spool's buffer
    char* p = head + kFrameHeader;
    *p++ = '\x03';  // payload version: a compressed run
    p = put_varint(p, stream_.size());
    const size_t before_stream = static_cast<size_t>(p - head);
    char* q = p;
    q = put_varint(q, count_);
    q = put_varint(q, line_bytes_);
    q = put_varint(q, metadata_bytes_);
    q = put_varint(q, zigzag(oldest_));
    *q++ = has_metadata_ ? '\x01' : '\x00';
    q = put_varint(q, raw_size_);
    const size_t after_stream = static_cast<size_t>(q - p);
    const size_t len = before_stream - kFrameHeader + stream_.size() + after_stream + clen;
    const size_t start = out.size();
    out.append(head, before_stream);
    out.append(stream_);
    out.append(p, after_stream);
    out.append(compressed_.data(), clen);
    put_header(out.data() + start, len);
    clear();
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

void append_compressed_run(std::string& out, const std::vector<Record>& records) {
    RunBuilder b;
    b.begin(records.front().stream);
    for (const auto& r : records) {
        const RecordRef ref{r.ts_ns, r.stream, r.line, &r.metadata, nullptr};
        b.add(ref, RunBuilder::entry_size(ref));
    }
    b.finish(out);
}

bool expand_run(const RunView& run, std::string& storage, std::vector<RecordView>& out,
                std::vector<MetadataView>& metadata, std::string* why) {
    const size_t out_start = out.size(), md_start = metadata.size();
    auto fail = [&](const char* w) {
        out.resize(out_start);
        metadata.resize(md_start);
        if (why) *why = w;
        return false;
    };
    size_t raw = 0;
    if (!snappy::GetUncompressedLength(run.compressed.data(), run.compressed.size(), &raw) || raw != run.raw_size ||
        raw > kMaxRawRun)
        return fail("compressed run of a wrong size");
    storage.resize(raw);
    if (!snappy::RawUncompress(run.compressed.data(), run.compressed.size(), storage.data()))
        return fail("compressed run does not decompress");
    const std::string_view in(storage);
    size_t pos = 0;
    uint64_t line_bytes = 0, md_bytes = 0;
    int64_t oldest = 0;
    while (pos < in.size()) {
        std::string_view e;
        bool present = false;
        RecordView v;
        v.stream = run.stream;
        if (!get_field(in, pos, 2, e, present) || !present || !get_entry(e, v, metadata, md_bytes))
            return fail("malformed entry in a compressed run");
        if (out.size() == out_start || v.ts_ns < oldest) oldest = v.ts_ns;
        line_bytes += v.line.size();
        out.push_back(v);
    }
    const bool has_md = metadata.size() > md_start;
    if (out.size() - out_start != run.count || line_bytes != run.line_bytes || md_bytes != run.metadata_bytes ||
        oldest != run.oldest_ts_ns || has_md != run.has_metadata)
        return fail("compressed run differs from its header");
    return true;
}

DecodeStatus decode_frame(std::string_view in, std::vector<RecordView>& out, std::vector<MetadataView>& metadata,
                          std::vector<RunView>& runs, size_t* consumed, std::string* why, int* version) {
    const size_t out_start = out.size(), md_start = metadata.size(), runs_start = runs.size();
    auto corrupt = [&](const char* w) {
        out.resize(out_start);
        metadata.resize(md_start);
        runs.resize(runs_start);
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
    } else if (payload[0] == '\x03') {
        RunView run;
        uint64_t count = 0, oldest = 0;
        if (!get_bytes(payload, pos, run.stream) || !get_varint(payload, pos, count) ||
            !get_varint(payload, pos, run.line_bytes) || !get_varint(payload, pos, run.metadata_bytes) ||
            !get_varint(payload, pos, oldest) || pos >= payload.size())
            return corrupt("malformed compressed run");
        const auto flags = static_cast<unsigned char>(payload[pos++]);
        // Snappy expands at most 64 bytes out of a 3-byte copy: a larger size is not a run we wrote.
        if (!get_varint(payload, pos, run.raw_size) || flags > 1 || count == 0 || count > UINT32_MAX - 1 ||
            run.raw_size > kMaxRawRun || run.raw_size < 2 * count || run.raw_size > 22 * (payload.size() - pos) + 64)
            return corrupt("malformed compressed run");
        run.count = static_cast<uint32_t>(count);
        run.oldest_ts_ns = unzigzag(oldest);
        run.has_metadata = flags == 1;
        run.compressed = payload.substr(pos);
        size_t raw = 0;
        if (!snappy::GetUncompressedLength(run.compressed.data(), run.compressed.size(), &raw) || raw != run.raw_size)
            return corrupt("compressed run of a wrong size");
        pos = payload.size();
        RecordView v;
        v.stream = run.stream;
        v.ts_ns = run.oldest_ts_ns;
        v.metadata_begin = static_cast<uint32_t>(metadata.size());
        v.run = static_cast<uint32_t>(runs.size());
        runs.push_back(run);
        out.push_back(v);
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
    std::vector<RunView> runs;
    std::string storage;
    const DecodeStatus st = decode_frame(in, v, md, runs, consumed, why, version);
    if (st != DecodeStatus::kOk) return st;
    if (!runs.empty()) {
        v.clear();
        if (!expand_run(runs.front(), storage, v, md, why)) return DecodeStatus::kCorrupt;
    }
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
