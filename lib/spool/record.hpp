#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
    // `shared` as encode_metadata() wrote it, where the caller keeps that (its lines' origin
    // does): copied whole instead of framed pair by pair for every line. Empty: not kept.
    std::string_view shared_wire = {};
};
// The (key | value) pairs of `md` as a record holds them, without their count.
std::string encode_metadata(const RecordRef::Metadata& md);

// A record decoded in place: views into the bytes it was decoded from (valid as long as they are).
// Its metadata is `metadata_count` pairs from `metadata_begin` of the vector the decoder appended
// them to (indices, not pointers: that vector may grow while more records are decoded).
using MetadataView = std::pair<std::string_view, std::string_view>;
struct RecordView {
    int64_t ts_ns = 0;
    std::string_view stream;
    std::string_view line;
    uint32_t metadata_begin = 0;
    uint32_t metadata_count = 0;
};

// On disk: "JTR1" | u32 payload length | u32 CRC-32 of the payload | payload, little-endian.
// Payload 1, one record: 0x01 | ts | stream | line | n | n x (key | value).
// Payload 2, a run of one stream's records: 0x02 | stream | (ts | line | n | n x (key | value))+
// to the payload's end: one checksum and one copy of the stream per run, not per line (what the
// spool writes since 0.9; both are read).
inline constexpr size_t kFrameHeader = 12;
inline constexpr uint32_t kMaxPayload = 8u << 20;

void append_frame(std::string& out, const RecordRef& r);  // payload 1
void append_frame(std::string& out, const Record& r);

// A run built in place: begin_run() appends the header (filled by end_run()) and the stream;
// each append_to_run() one record (its stream is the run's).
size_t begin_run(std::string& out, std::string_view stream);  // where the frame starts
void append_to_run(std::string& out, const RecordRef& r);
void append_to_run(std::string& out, const RecordRef& r, size_t size);  // size: run_record_size(r)
void end_run(std::string& out, size_t start);
size_t run_header_size(std::string_view stream);                        // frame header, version and stream
size_t run_record_size(const RecordRef& r);                             // what append_to_run adds
void append_run(std::string& out, const std::vector<Record>& records);  // one stream's, at least one

enum class DecodeStatus { kOk, kNeedMore, kCorrupt };
// Decodes the frame at the start of `in`; on kOk sets *consumed to its length and appends its
// records (one, or a run's) to `out`: views into `in`, their metadata appended to `metadata`. On
// any other status both are as they were. *version: the payload's (1 or 2).
DecodeStatus decode_frame(std::string_view in, std::vector<RecordView>& out, std::vector<MetadataView>& metadata,
                          size_t* consumed, std::string* why = nullptr, int* version = nullptr);
// The same as copies, replacing `out`'s contents.
DecodeStatus decode_frame(std::string_view in, std::vector<Record>& out, size_t* consumed, std::string* why = nullptr,
                          int* version = nullptr);

}  // namespace jobtrail::spool
