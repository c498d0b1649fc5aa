#pragma once

#include <cstdint>
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

}  // namespace jobtrail::spool
