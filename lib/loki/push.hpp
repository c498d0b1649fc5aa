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

#include "common/buffer.hpp"
#include "loki/label_name.hpp"  // valid_label_name

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
// A request body buffer, reused from push to push, not zero-filled when it grows: snappy
// touches only the bytes it writes, so memory is what the bodies take, not their bound (a
// zero-filled std::string of MaxCompressedLength per body in flight was 7 MiB of the shipper's peak).
using Buffer = jobtrail::Buffer;

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
// entries uncompressed, in bytes (StreamAdapter.entries fields, lib/loki/entry_wire.hpp).
void encode_push_runs(std::string_view labels, std::span<const std::string_view> elements, uint64_t raw_entries,
                      Buffer& out, size_t* size);

}  // namespace jobtrail::loki
