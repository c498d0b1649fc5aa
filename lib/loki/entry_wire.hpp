#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/protowire.hpp"
#include "common/varint.hpp"

// Loki's logproto EntryAdapter on the wire, as one StreamAdapter.entries field
// (0x12 | length | EntryAdapter): the push request (lib/loki/push.cpp) and the spool's compressed
// runs (lib/spool/record.cpp) write it through here, byte for byte the same, so the sender puts a
// run's entries into a request as they are; the spool reads it back through here.
// EntryAdapter: 1 timestamp (Timestamp: 1 seconds, 2 nanos), 2 line, 3 structuredMetadata
// (LabelPairAdapter: 1 name, 2 value), repeated; zero and empty fields are left out (proto3).
// lib/loki/push_test.cpp checks these bytes against libprotobuf.
// Header-only: per entry, on the shipper's hot path, and in the fuzz build (no libjobtrail_loki).
// Metadata comes through `for_pairs(f)`, which calls f(name, value) for each pair.
namespace jobtrail::loki::entry_wire {

inline uint64_t ts_seconds(int64_t ts_ns) {
    return static_cast<uint64_t>(ts_ns / 1'000'000'000);
}
inline uint64_t ts_nanos(int64_t ts_ns) {
    return static_cast<uint64_t>(ts_ns % 1'000'000'000);
}
// The Timestamp message's size is its seconds' part plus its nanos' part (each 0 when zero).
constexpr size_t seconds_size(uint64_t sec) {
    return sec ? 1 + varint_size(sec) : 0;
}
constexpr size_t nanos_size(uint64_t nanos) {
    return nanos ? 1 + varint_size(nanos) : 0;
}
inline size_t timestamp_size(int64_t ts_ns) {
    const uint64_t sec = ts_seconds(ts_ns), nanos = ts_nanos(ts_ns);
    return seconds_size(sec) + nanos_size(nanos);
}

inline size_t pair_size(std::string_view name, std::string_view value) {
    return protowire::string_field_size(name.size()) + protowire::string_field_size(value.size());
}

// The EntryAdapter's size, its Timestamp message being ts_size bytes.
template <typename ForPairs>
inline size_t entry_size(size_t ts_size, std::string_view line, ForPairs&& for_pairs) {
    size_t n = protowire::field_size(ts_size) + protowire::string_field_size(line.size());
    for_pairs([&](std::string_view k, std::string_view v) { n += protowire::field_size(pair_size(k, v)); });
    return n;
}
// The entries field's size around an EntryAdapter of `entry` bytes.
constexpr size_t field_size(size_t entry) {
    return protowire::field_size(entry);
}

// Writes the entries field at p, sized beforehand: the EntryAdapter `entry` bytes (entry_size),
// its Timestamp ts_size (timestamp_size). Where it ends.
template <typename ForPairs>
inline char* put_entry(char* p, size_t entry, size_t ts_size, int64_t ts_ns, std::string_view line,
                       ForPairs&& for_pairs) {
    p = protowire::put_tag_len(p, 2, entry);    // StreamAdapter.entries
    p = protowire::put_tag_len(p, 1, ts_size);  // EntryAdapter.timestamp
    if (const uint64_t sec = ts_seconds(ts_ns)) {
        *p++ = '\x08';  // Timestamp.seconds
        p = put_varint(p, sec);
    }
    if (const uint64_t nanos = ts_nanos(ts_ns)) {
        *p++ = '\x10';  // Timestamp.nanos
        p = put_varint(p, nanos);
    }
    p = protowire::put_string(p, 2, line);  // EntryAdapter.line
    for_pairs([&](std::string_view k, std::string_view v) {
        p = protowire::put_tag_len(p, 3, pair_size(k, v));  // EntryAdapter.structuredMetadata
        p = protowire::put_string(p, 1, k);                 // LabelPairAdapter.name
        p = protowire::put_string(p, 2, v);                 // LabelPairAdapter.value
    });
    return p;
}

// Reads the entries field at pos into `entry` (its EntryAdapter); false if none is there whole.
inline bool get_entry_field(std::string_view in, size_t& pos, std::string_view& entry) {
    bool present = false;
    return protowire::get_field(in, pos, 2, entry, present) && present;
}

// Reads an EntryAdapter in exactly the form put_entry writes (anything else is not ours: false),
// calling on_pair(name, value) for each metadata pair.
template <typename OnPair>
inline bool get_entry(std::string_view e, int64_t& ts_ns, std::string_view& line, OnPair&& on_pair) {
    size_t pos = 0;
    std::string_view ts;
    bool present = false;
    if (!protowire::get_field(e, pos, 1, ts, present) || !present) return false;
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
    ts_ns = static_cast<int64_t>(sec * 1'000'000'000ULL + nanos);  // wraps as the split did
    if (ts_seconds(ts_ns) != sec || ts_nanos(ts_ns) != nanos) return false;
    line = {};
    if (!protowire::get_field(e, pos, 2, line, present) || (present && line.empty())) return false;
    while (pos < e.size()) {
        std::string_view kv, k, v;
        if (!protowire::get_field(e, pos, 3, kv, present) || !present) return false;
        size_t kp = 0;
        if (!protowire::get_field(kv, kp, 1, k, present) || (present && k.empty())) return false;
        if (!protowire::get_field(kv, kp, 2, v, present) || (present && v.empty())) return false;
        if (kp != kv.size()) return false;
        on_pair(k, v);
    }
    return true;
}

}  // namespace jobtrail::loki::entry_wire
