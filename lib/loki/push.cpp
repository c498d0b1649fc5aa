#include "loki/push.hpp"

#include <snappy.h>

#include "common/text.hpp"

namespace jobtrail::loki {
namespace {

// Protobuf wire format: varints, and length-delimited fields (wire type 2) for strings and
// embedded messages. Proto3 leaves out empty strings and zero numbers.
size_t varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        ++n;
    }
    return n;
}
size_t field_size(size_t payload) {
    return 1 + varint_size(payload) + payload;
}  // one-byte tag
size_t string_field_size(size_t len) {
    return len ? field_size(len) : 0;
}

void put_varint(std::string& out, uint64_t v) {
    while (v >= 0x80) {
        out += static_cast<char>((v & 0x7f) | 0x80);
        v >>= 7;
    }
    out += static_cast<char>(v);
}
void put_tag_len(std::string& out, int field, size_t len) {
    out += static_cast<char>((field << 3) | 2);
    put_varint(out, len);
}
void put_string(std::string& out, int field, std::string_view s) {
    if (s.empty()) return;
    put_tag_len(out, field, s.size());
    out.append(s);
}

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

bool valid_label_name(std::string_view n) {
    if (n.empty() || (n.size() >= 2 && n[0] == '_' && n[1] == '_')) return false;
    for (size_t i = 0; i < n.size(); ++i) {
        const char c = n[i];
        const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
    }
    return true;
}

std::string encode_push(const std::vector<StreamRef>& streams, bool with_metadata) {
    // The wire format written directly: libprotobuf's message building (a heap string per line
    // and per metadata value, UTF-8 checks, size passes) was a sixth of the shipper's CPU.
    // tests/loki (push_test.cpp) checks these bytes against libprotobuf's own serialization.
    auto entry_size = [&](const EntryRef& e) {
        const uint64_t sec = static_cast<uint64_t>(e.ts_ns / 1'000'000'000);
        const uint64_t nanos = static_cast<uint64_t>(e.ts_ns % 1'000'000'000);
        const size_t ts = (sec ? 1 + varint_size(sec) : 0) + (nanos ? 1 + varint_size(nanos) : 0);
        size_t n = field_size(ts) + string_field_size(e.line.size());
        if (with_metadata && e.metadata)
            for (const auto& [k, v] : *e.metadata)
                n += field_size(string_field_size(k.size()) + string_field_size(v.size()));
        return n;
    };
    std::vector<size_t> stream_sizes(streams.size());
    size_t total = 0;
    for (size_t i = 0; i < streams.size(); ++i) {
        size_t n = string_field_size(streams[i].labels.size());
        for (const auto& e : streams[i].entries) n += field_size(entry_size(e));
        stream_sizes[i] = n;
        total += field_size(n);
    }
    std::string raw;
    raw.reserve(total);
    for (size_t i = 0; i < streams.size(); ++i) {
        put_tag_len(raw, 1, stream_sizes[i]);   // PushRequest.streams
        put_string(raw, 1, streams[i].labels);  // StreamAdapter.labels
        for (const auto& e : streams[i].entries) {
            put_tag_len(raw, 2, entry_size(e));  // StreamAdapter.entries
            const uint64_t sec = static_cast<uint64_t>(e.ts_ns / 1'000'000'000);
            const uint64_t nanos = static_cast<uint64_t>(e.ts_ns % 1'000'000'000);
            put_tag_len(raw, 1, (sec ? 1 + varint_size(sec) : 0) + (nanos ? 1 + varint_size(nanos) : 0));
            if (sec) {
                raw += '\x08';  // Timestamp.seconds
                put_varint(raw, sec);
            }
            if (nanos) {
                raw += '\x10';  // Timestamp.nanos
                put_varint(raw, nanos);
            }
            put_string(raw, 2, e.line);  // EntryAdapter.line
            if (!with_metadata || !e.metadata) continue;
            for (const auto& [k, v] : *e.metadata) {
                put_tag_len(raw, 3, string_field_size(k.size()) + string_field_size(v.size()));  // structuredMetadata
                put_string(raw, 1, k);
                put_string(raw, 2, v);
            }
        }
    }
    std::string out;
    snappy::Compress(raw.data(), raw.size(), &out);
    return out;
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
