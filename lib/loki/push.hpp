#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace jobtrail::loki {

using LabelSet = std::map<std::string, std::string>;  // sorted: one stream, one text form

struct Entry {
    int64_t ts_ns = 0;
    std::string line;
    std::vector<std::pair<std::string, std::string>> metadata;  // structured metadata
};

struct Stream {
    LabelSet labels;
    std::vector<Entry> entries;
};

// {a="b", c="d\"e"}: the Prometheus text form Loki parses (escapes \\, \" and \n).
std::string format_labels(const LabelSet& labels);

// Label names Loki accepts: [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__".
bool valid_label_name(std::string_view name);

// A snappy-compressed (block format) logproto.PushRequest, for Content-Type
// application/x-protobuf. Structured metadata is left out when the server does not take it.
std::string encode_push(const std::vector<Stream>& streams, bool with_metadata);

// The same, from views: labels already in text form (as the spool keeps them) and lines and
// metadata owned by the caller, so building a request copies each byte once.
// Metadata comes from `metadata`, or else from `metadata_views` (views into the spool's read buffer).
struct EntryRef {
    int64_t ts_ns = 0;
    std::string_view line;
    const std::vector<std::pair<std::string, std::string>>* metadata = nullptr;
    std::span<const std::pair<std::string_view, std::string_view>> metadata_views = {};
};
struct StreamRef {
    std::string_view labels;
    std::vector<EntryRef> entries;
};
std::string encode_push(const std::vector<StreamRef>& streams, bool with_metadata);

// The same into buffers one caller reuses request after request: nothing allocated or zero-filled
// once they have grown. The request is the first `*size` bytes of `out` (out.size() is its capacity).
// A request body buffer, reused from push to push, that is not zero-filled when it grows:
// snappy touches only the bytes it writes, so memory is what the bodies take, not their bound
// (a zero-filled std::string of MaxCompressedLength per body in flight was 7 MiB of the
// shipper's peak).
class Buffer {
public:
    Buffer() = default;
    Buffer(Buffer&& o) noexcept : data_(std::move(o.data_)), cap_(o.cap_) { o.cap_ = 0; }
    Buffer& operator=(Buffer&& o) noexcept {
        data_ = std::move(o.data_);
        cap_ = o.cap_;
        o.cap_ = 0;
        return *this;
    }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer() = default;
    // What was in it is not kept. Grown by an eighth more than asked, so bodies a little bigger
    // each time do not allocate each time.
    char* reserve(size_t n) {
        if (cap_ < n) {
            const size_t cap = n + n / 8;
            data_.reset(new char[cap]);  // NOLINT(cppcoreguidelines-owning-memory): uninitialised on purpose
            cap_ = cap;
        }
        return data_.get();
    }
    // Grows to at least n keeping the first `keep` bytes.
    char* grow(size_t n, size_t keep) {
        if (cap_ < n) {
            Buffer b;
            b.reserve(n);
            if (keep) std::memcpy(b.data_.get(), data_.get(), keep);
            *this = std::move(b);
        }
        return data_.get();
    }
    void release() { *this = Buffer{}; }
    size_t capacity() const { return cap_; }
    char* data() { return data_.get(); }
    const char* data() const { return data_.get(); }

private:
    std::unique_ptr<char[]> data_;
    size_t cap_ = 0;
};

struct PushScratch {
    // The uncompressed protobuf, made a block at a time as snappy takes it: about 64 KiB whatever
    // the request's size (a request's whole body was a megabyte of the shipper's memory).
    Buffer raw;
    std::vector<size_t> entry_sizes, stream_sizes;
    std::vector<uint8_t> ts_sizes;  // each entry's Timestamp message, from the sizing pass
};
void encode_push(const std::vector<StreamRef>& streams, bool with_metadata, PushScratch& scratch, Buffer& out,
                 size_t* size);

// One stream's request from entries already encoded and snappy-compressed (the spool's
// compressed runs): snappy's elements copy back only within what they produce, so the runs'
// elements follow one another as they are, behind a literal holding the request's own header.
// `elements`: each run's snappy block without its length preamble; `raw_entries`: the runs'
// entries uncompressed, in bytes (StreamAdapter.entries, each 0x12 | length | EntryAdapter).
void encode_push_runs(std::string_view labels, std::span<const std::string_view> elements, uint64_t raw_entries,
                      Buffer& out, size_t* size);

}  // namespace jobtrail::loki
