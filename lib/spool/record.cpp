#include "spool/record.hpp"

#include <snappy.h>

#include <algorithm>
#include <cstring>

#include "common/crc32.hpp"
#include "common/protowire.hpp"
#include "common/varint.hpp"
#include "loki/entry_wire.hpp"

namespace jobtrail::spool {
namespace {

namespace entry_wire = loki::entry_wire;

constexpr char kMagic[4] = {'J', 'T', 'R', '1'};

uint32_t get_u32(std::string_view in, size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
    return v;
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

// A run's metadata pairs, f(name, value) each: `shared` then `own`.
template <typename F>
void for_pairs(const RecordRef& r, F&& f) {
    if (r.shared)
        for (const auto& [k, v] : *r.shared) f(std::string_view(k), std::string_view(v));
    if (r.own)
        for (const auto& [k, v] : *r.own) f(std::string_view(k), std::string_view(v));
}

// Frame header, version and stream.
size_t run_header_size(std::string_view stream) {
    return kFrameHeader + 1 + varint_size(stream.size()) + stream.size();
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
    return entry_wire::field_size(
        entry_wire::entry_size(entry_wire::timestamp_size(r.ts_ns), r.line, [&](auto&& f) { for_pairs(r, f); }));
}

void RunBuilder::begin(std::string_view stream) {
    clear();
    open_ = true;
    stream_.assign(stream);
}

void RunBuilder::add(const RecordRef& r, size_t size) {
    const size_t need = raw_size_ + size;
    char* p =
        (need > raw_.capacity() ? raw_.grow(std::max(2 * raw_.capacity(), need), raw_size_) : raw_.data()) + raw_size_;
    const char* const end = p + size;
    bool any = false;
    p = entry_wire::put_entry(p, protowire::payload_size(size), entry_wire::timestamp_size(r.ts_ns), r.ts_ns, r.line,
                              [&](auto&& put) {
                                  for_pairs(r, [&](std::string_view k, std::string_view v) {
                                      put(k, v);
                                      metadata_bytes_ += k.size() + v.size();
                                      any = true;
                                  });
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
    std::memset(head, 0, kFrameHeader);  // put_frame_header() fills it in the spool's buffer
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
    put_frame_header(out.data() + start, len);
    clear();
}

void put_frame_header(char* frame, size_t len) {
    const uint32_t crc = crc32(std::string_view(frame + kFrameHeader, len));
    std::memcpy(frame, kMagic, 4);
    for (int i = 0; i < 4; ++i) {
        frame[4 + i] = static_cast<char>((len >> (8 * i)) & 0xff);
        frame[8 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
    }
}

uint32_t frame_payload_length(std::string_view frame) {
    return get_u32(frame, 4);
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
        RecordView v;
        v.stream = run.stream;
        v.metadata_begin = static_cast<uint32_t>(metadata.size());
        const auto pair = [&](std::string_view k, std::string_view val) {
            metadata.emplace_back(k, val);
            ++v.metadata_count;
            md_bytes += k.size() + val.size();
        };
        if (!entry_wire::get_entry_field(in, pos, e) || !entry_wire::get_entry(e, v.ts_ns, v.line, pair))
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
    const uint32_t len = frame_payload_length(in);
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
        if (why) *why = "unknown payload version";
        return DecodeStatus::kUnknownVersion;
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
