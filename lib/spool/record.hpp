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
};

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
inline constexpr size_t kFrameHeader = 12;
inline constexpr uint32_t kMaxPayload = 8u << 20;

void append_frame(std::string& out, const RecordRef& r);
void append_frame(std::string& out, const Record& r);

enum class DecodeStatus { kOk, kNeedMore, kCorrupt };
// Decodes the frame at the start of `in`; on kOk sets *consumed to its length. `out` is
// overwritten in place (its strings keep their capacity, so a reused Record allocates little);
// on any other status its contents are unspecified.
DecodeStatus decode_frame(std::string_view in, Record& out, size_t* consumed, std::string* why = nullptr);
// The same without a copy: `out` views `in`, its metadata is appended to `metadata` (on any other
// status than kOk, `metadata` is as it was).
DecodeStatus decode_frame(std::string_view in, RecordView& out, std::vector<MetadataView>& metadata, size_t* consumed,
                          std::string* why = nullptr);

}  // namespace jobtrail::spool
