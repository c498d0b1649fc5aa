#include "loki/push.hpp"

#include <snappy-sinksource.h>
#include <snappy.h>

#include <cstdlib>
#include <cstring>

#include "common/protowire.hpp"
#include "common/text.hpp"
#include "common/varint.hpp"
#include "loki/entry_wire.hpp"

namespace jobtrail::loki {
namespace {

using protowire::string_field_size;

// An entry's metadata pairs, f(name, value) each, or none when the server does not take them.
template <typename F>
void for_metadata(const EntryRef& e, bool with_metadata, F&& f) {
    if (!with_metadata) return;
    if (e.metadata) {
        for (const auto& [k, v] : *e.metadata) f(std::string_view(k), std::string_view(v));
    } else {
        for (const auto& [k, v] : e.metadata_views) f(k, v);
    }
}

// PushRequest.streams: its tag and length, then StreamAdapter.labels; its entries follow.
size_t stream_size(std::string_view labels, size_t entries) {
    return string_field_size(labels.size()) + entries;
}
size_t stream_header_size(std::string_view labels, size_t stream) {
    return 1 + varint_size(stream) + string_field_size(labels.size());
}
char* put_stream_header(char* p, std::string_view labels, size_t stream) {
    p = protowire::put_tag_len(p, 1, stream);    // PushRequest.streams
    return protowire::put_string(p, 1, labels);  // StreamAdapter.labels
}

// The request body made as snappy reads it: whole items (a stream's header, an entry) written
// into scratch.raw until a block is ready, so snappy compresses from there without a copy and
// the body is never whole in memory. Sizes come from the sizing pass.
class BodySource final : public snappy::Source {
public:
    static constexpr size_t kBlock = 64 << 10;  // snappy's block

    BodySource(const std::vector<StreamRef>& streams, bool with_metadata, PushScratch& scratch, size_t total)
        : streams_(streams), with_metadata_(with_metadata), scratch_(scratch), total_(total) {
        scratch_.raw.grow(kBlock + 4096, 0);
    }
    BodySource(const BodySource&) = delete;
    BodySource& operator=(const BodySource&) = delete;
    ~BodySource() override = default;

    size_t Available() const override { return total_ - consumed_; }
    const char* Peek(size_t* len) override {
        if (end_ - begin_ < kBlock) fill();
        // Nothing made while snappy still expects bytes: the sizing pass was wrong (snappy would
        // ask again forever).
        if (end_ == begin_) std::abort();
        *len = end_ - begin_;
        return scratch_.raw.data() + begin_;
    }
    void Skip(size_t n) override {
        begin_ += n;
        consumed_ += n;
    }
    // The sizing and writing passes must agree; a mismatch is a bug to stop at, not to send.
    void finish() {
        if (made_ != total_ || consumed_ != total_ || i_ != streams_.size()) std::abort();
        // A block grown for one huge entry is not kept.
        if (scratch_.raw.capacity() > 4 * kBlock) scratch_.raw.release();
    }

private:
    void fill() {
        const size_t left = end_ - begin_;
        char* buf = scratch_.raw.data();
        if (begin_ && left) std::memmove(buf, buf + begin_, left);
        begin_ = 0;
        end_ = left;
        while (end_ < kBlock && i_ < streams_.size()) {
            const StreamRef& st = streams_[i_];
            if (!head_) {
                const size_t n = stream_header_size(st.labels, scratch_.stream_sizes[i_]);
                buf = room(n);
                advance(put_stream_header(buf + end_, st.labels, scratch_.stream_sizes[i_]), buf, n);
                head_ = true;
            }
            for (; j_ < st.entries.size() && end_ < kBlock; ++j_, ++k_) {
                const size_t n = entry_wire::field_size(scratch_.entry_sizes[k_]);
                buf = room(n);
                advance(write_entry(buf + end_, st.entries[j_]), buf, n);
            }
            if (j_ == st.entries.size()) {
                ++i_;
                j_ = 0;
                head_ = false;
            }
        }
    }
    char* room(size_t n) {
        return end_ + n <= scratch_.raw.capacity() ? scratch_.raw.data() : scratch_.raw.grow(end_ + n, end_);
    }
    // Items are written into room sized exactly beforehand (the sizes pass below).
    void advance(const char* p, const char* buf, size_t n) {
        if (p != buf + end_ + n) std::abort();  // the sizing pass said otherwise: a bug
        end_ += n;
        made_ += n;
    }

    char* write_entry(char* p, const EntryRef& e) {
        return entry_wire::put_entry(p, scratch_.entry_sizes[k_], scratch_.ts_sizes[k_], e.ts_ns, e.line,
                                     [&](auto&& f) { for_metadata(e, with_metadata_, f); });
    }

    const std::vector<StreamRef>& streams_;
    const bool with_metadata_;
    PushScratch& scratch_;
    const size_t total_;
    size_t consumed_ = 0, made_ = 0;
    size_t begin_ = 0, end_ = 0;    // what is made and not yet taken, in scratch_.raw
    size_t i_ = 0, j_ = 0, k_ = 0;  // stream, its entry, the entry over all streams
    bool head_ = false;             // stream i_'s header is written
};

}  // namespace

std::string format_labels(const LabelSet& labels) {
    std::string s = "{";
    bool first = true;
    for (const auto& [k, v] : labels) {
        if (!first) s += ", ";
        first = false;
        s += k;
        s += '=';
        append_quoted(s, v);
    }
    s += '}';
    return s;
}

void encode_push(const std::vector<StreamRef>& streams, bool with_metadata, PushScratch& scratch, Buffer& out,
                 size_t* size) {
    // The wire format written directly: libprotobuf's message building (a heap string per line
    // and per metadata value, UTF-8 checks, size passes) was a sixth of the shipper's CPU.
    // lib/loki/push_test.cpp checks these bytes against libprotobuf's own serialization.
    // A run of entries mostly shares its second: its varint is sized once.
    uint64_t last_sec = 0;
    size_t last_sec_size = 0;
    auto ts_size = [&](int64_t ts_ns) {
        const uint64_t sec = entry_wire::ts_seconds(ts_ns), nanos = entry_wire::ts_nanos(ts_ns);
        if (sec != last_sec) {
            last_sec = sec;
            last_sec_size = entry_wire::seconds_size(sec);
        }
        return last_sec_size + entry_wire::nanos_size(nanos);
    };
    // Sizes first (protobuf prefixes every message with its length), then one writing pass.
    auto& entry_sizes = scratch.entry_sizes;
    auto& stream_sizes = scratch.stream_sizes;
    entry_sizes.clear();
    scratch.ts_sizes.clear();
    stream_sizes.assign(streams.size(), 0);
    size_t total = 0;
    for (size_t i = 0; i < streams.size(); ++i) {
        size_t entries = 0;
        for (const auto& e : streams[i].entries) {
            const size_t ts = ts_size(e.ts_ns);
            scratch.ts_sizes.push_back(static_cast<uint8_t>(ts));
            const size_t en = entry_wire::entry_size(ts, e.line, [&](auto&& f) { for_metadata(e, with_metadata, f); });
            entry_sizes.push_back(en);
            entries += entry_wire::field_size(en);
        }
        stream_sizes[i] = stream_size(streams[i].labels, entries);
        total += stream_header_size(streams[i].labels, stream_sizes[i]) + entries;
    }
    BodySource body(streams, with_metadata, scratch, total);
    snappy::UncheckedByteArraySink sink(out.reserve(snappy::MaxCompressedLength(total)));
    *size = snappy::Compress(&body, &sink);
    body.finish();
}

void encode_push_runs(std::string_view labels, std::span<const std::string_view> elements, uint64_t raw_entries,
                      Buffer& out, size_t* size) {
    const size_t stream = stream_size(labels, raw_entries);
    const size_t header = stream_header_size(labels, stream);
    const size_t total = header + raw_entries;
    size_t n = varint_size(total) + 5 + header;  // preamble, the literal's tag (at most 5 bytes)
    for (const auto e : elements) n += e.size();
    char* const start = out.reserve(n);
    char* p = put_varint(start, total);  // snappy's preamble: the uncompressed length
    // A literal element: tag 00, its length less one in the tag's six bits below 60, or in the
    // 1 to 4 bytes after a tag of 60 to 63.
    const size_t lit = header - 1;
    if (lit < 60) {
        *p++ = static_cast<char>(lit << 2);
    } else {
        const int bytes = lit < (1u << 8) ? 1 : lit < (1u << 16) ? 2 : lit < (1u << 24) ? 3 : 4;
        *p++ = static_cast<char>((59 + bytes) << 2);
        for (int i = 0; i < bytes; ++i) *p++ = static_cast<char>((lit >> (8 * i)) & 0xff);
    }
    p = put_stream_header(p, labels, stream);
    for (const auto e : elements) {
        std::memcpy(p, e.data(), e.size());
        p += e.size();
    }
    *size = static_cast<size_t>(p - start);
}

std::string encode_push(const std::vector<StreamRef>& streams, bool with_metadata) {
    PushScratch scratch;
    Buffer out;
    size_t size = 0;
    encode_push(streams, with_metadata, scratch, out, &size);
    return std::string(out.data(), size);
}

std::string encode_push(const std::vector<Stream>& streams, bool with_metadata) {
    std::vector<std::string> labels;
    labels.reserve(streams.size());
    std::vector<StreamRef> refs;
    refs.reserve(streams.size());
    for (const auto& s : streams) {
        labels.push_back(format_labels(s.labels));
        StreamRef r{labels.back(), {}};
        for (const auto& e : s.entries) r.entries.push_back({e.ts_ns, e.line, &e.metadata});
        refs.push_back(std::move(r));
    }
    return encode_push(refs, with_metadata);
}

}  // namespace jobtrail::loki
