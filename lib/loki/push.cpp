#include "loki/push.hpp"

#include <google/protobuf/arena.h>
#include <snappy.h>

#include "common/text.hpp"
#include "push.pb.h"

namespace jobtrail::loki {

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
    // One arena per request: thousands of entries would otherwise be as many allocations and
    // destructor calls.
    google::protobuf::Arena arena;
    auto& req = *google::protobuf::Arena::CreateMessage<logproto::PushRequest>(&arena);
    req.mutable_streams()->Reserve(static_cast<int>(streams.size()));
    for (const auto& s : streams) {
        auto* ps = req.add_streams();
        ps->set_labels(s.labels.data(), s.labels.size());
        ps->mutable_entries()->Reserve(static_cast<int>(s.entries.size()));
        for (const auto& e : s.entries) {
            auto* pe = ps->add_entries();
            pe->mutable_timestamp()->set_seconds(e.ts_ns / 1'000'000'000);
            pe->mutable_timestamp()->set_nanos(static_cast<int32_t>(e.ts_ns % 1'000'000'000));
            pe->set_line(e.line.data(), e.line.size());
            if (!with_metadata || !e.metadata) continue;
            for (const auto& [k, v] : *e.metadata) {
                auto* kv = pe->add_structuredmetadata();
                kv->set_name(k);
                kv->set_value(v);
            }
        }
    }
    std::string raw;
    req.SerializeToString(&raw);
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
