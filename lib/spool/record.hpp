#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/buffer.hpp"

namespace jobtrail::spool {

// One log record as the shipper keeps it on disk until Loki acknowledges it: its final
// timestamp (fixed when first read, so a re-send is byte-identical and Loki deduplicates it),
// its stream (labels in Loki's text form) and structured metadata.
struct Record {
    int64_t ts_ns = 0;
    std::string stream;  // {job="kmsg", node="gpu01"}
    std::string line;
    std::vector<std::pair<std::string, std::string>> metadata;

    bool operator==(const Record&) const = default;
};

// A record to append, by reference: the shipper's lines share their stream text and part of
// their metadata, so nothing is copied before it is framed. Metadata is `shared` then `own`.
struct RecordRef {
    using Metadata = std::vector<std::pair<std::string, std::string>>;
    int64_t ts_ns = 0;
    std::string_view stream;
    std::string_view line;
    const Metadata* shared = nullptr;
    const Metadata* own = nullptr;
};

// A record decoded in place: views into the bytes it was decoded from (valid as long as they are).
// Its metadata is `metadata_count` pairs from `metadata_begin` of the vector the decoder appended
// them to (indices, not pointers: that vector may grow while more records are decoded).
// A compressed run (payload 3) read as one RecordView standing for all its records: its stream,
// the oldest timestamp in it, no line, and `run` its index in the runs the decoder appended to.
using MetadataView = std::pair<std::string_view, std::string_view>;
inline constexpr uint32_t kNoRun = UINT32_MAX;
struct RecordView {
    int64_t ts_ns = 0;
    std::string_view stream;
    std::string_view line;
    uint32_t metadata_begin = 0;
    uint32_t metadata_count = 0;
    uint32_t run = kNoRun;
};

// A compressed run as read: its records are push-ready logproto entries (StreamAdapter.entries
// fields, lib/loki/entry_wire.hpp), snappy-compressed, so the sender puts its snappy elements
// into a request as they are, behind a push header of its own: no decode, no second compression.
struct RunView {
    std::string_view stream;
    uint32_t count = 0;
    uint64_t line_bytes = 0;      // of its lines
    uint64_t metadata_bytes = 0;  // of its structured metadata's names and values
    int64_t oldest_ts_ns = 0;
    bool has_metadata = false;
    uint64_t raw_size = 0;              // of its entries uncompressed
    std::string_view compressed;        // snappy's block format: length preamble, then elements
    std::string_view elements() const;  // the block without its preamble
};
// Uncompressed entries a run may hold: a shipper line is at most 4 MiB.
inline constexpr uint64_t kMaxRawRun = 32ULL << 20;

// A compressed run built record by record (the spool's open run), then closed into a frame.
class RunBuilder {
public:
    // What add() puts into the run for r (its entry, uncompressed).
    static size_t entry_size(const RecordRef& r);
    static size_t frame_bound(std::string_view stream, size_t raw);
    void begin(std::string_view stream);
    void add(const RecordRef& r, size_t size);  // size: entry_size(r)
    bool open() const { return open_; }
    std::string_view stream() const { return stream_; }
    size_t raw_size() const { return raw_size_; }
    // Appends the run's frame (payload 3) to out and empties the builder; nothing if not open.
    // The frame is at most frame_bound(stream, raw_size()) bytes.
    void finish(std::string& out);
    void clear();

private:
    bool open_ = false;
    std::string stream_;
    Buffer raw_;  // the entries so far, raw_size_ bytes
    size_t raw_size_ = 0;
    Buffer compressed_;
    uint32_t count_ = 0;
    uint64_t line_bytes_ = 0, metadata_bytes_ = 0;
    int64_t oldest_ = 0;
    bool has_metadata_ = false;
};

// On disk: "JTR1" | u32 payload length | u32 CRC-32 of the payload | payload, little-endian.
// Payload 1, one record: 0x01 | ts | stream | line | n | n x (key | value).
// Payload 2, a run of one stream's records: 0x02 | stream | (ts | line | n | n x (key | value))+
// to the payload's end: one checksum and one copy of the stream per run, not per line.
// Payload 3, a compressed run (RunView; what the spool writes now; all three are read):
// 0x03 | stream | count | line bytes | metadata bytes | oldest ts (zigzag) | flags (1: metadata) |
// raw size | snappy block. Payloads 1 and 2 are written only by older shippers (and, for the
// tests, by tests/support/spool_frames.hpp).
inline constexpr size_t kFrameHeader = 12;
inline constexpr uint32_t kMaxPayload = 8u << 20;

// Fills the header of the frame at `frame`, its payload the `len` bytes after the header.
void put_frame_header(char* frame, size_t len);
// The payload length a frame's header says (`frame` holds at least kFrameHeader bytes).
uint32_t frame_payload_length(std::string_view frame);

// kUnknownVersion: whole and summed right, but a payload version this build does not know
// (written by a newer shipper).
enum class DecodeStatus { kOk, kNeedMore, kCorrupt, kUnknownVersion };
// Decodes the frame at the start of `in`; on kOk sets *consumed to its length and appends its
// records (one, or a run's) to `out`: views into `in`, their metadata appended to `metadata`; a
// compressed run is one RecordView, its RunView appended to `runs`. On any other status all are
// as they were. *version: the payload's (1, 2 or 3).
DecodeStatus decode_frame(std::string_view in, std::vector<RecordView>& out, std::vector<MetadataView>& metadata,
                          std::vector<RunView>& runs, size_t* consumed, std::string* why = nullptr,
                          int* version = nullptr);
// A compressed run's records: decompressed into `storage` (replaced; the views point into it),
// appended to `out`, their metadata to `metadata`. False (and `why`) if the run does not decode
// to exactly what its header says; then nothing is appended.
bool expand_run(const RunView& run, std::string& storage, std::vector<RecordView>& out,
                std::vector<MetadataView>& metadata, std::string* why = nullptr);

// The same as copies, replacing `out`'s contents (a compressed run's records expanded).
DecodeStatus decode_frame(std::string_view in, std::vector<Record>& out, size_t* consumed, std::string* why = nullptr,
                          int* version = nullptr);

}  // namespace jobtrail::spool
