#include "loki/query_response.hpp"

#include <nlohmann/json.hpp>

#include "common/text.hpp"

namespace jobtrail::loki {
namespace {

// A string member, or "" when it is missing or of another type (json::value() would throw).
std::string str(const nlohmann::json& obj, const char* key) {
    const auto it = obj.find(key);
    return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

Status parse_streams_response(const std::string& body, std::vector<LabelSet>& streams,
                              std::vector<std::pair<size_t, QueryEntry>>& entries) {
    const auto doc = nlohmann::json::parse(body, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) {
        return Status::failure("response is not JSON");
    }
    if (str(doc, "status") != "success") {
        return Status::failure("status is not success");
    }
    const auto data = doc.find("data");
    if (data == doc.end() || !data->is_object() || str(*data, "resultType") != "streams") {
        return Status::failure("data.resultType is not streams (a metric query?)");
    }
    const auto result = data->find("result");
    if (result == data->end() || !result->is_array()) {
        return Status::failure("data.result is not a list");
    }
    for (const auto& s : *result) {
        if (!s.is_object() || !s.contains("stream") || !s["stream"].is_object() || !s.contains("values") ||
            !s["values"].is_array()) {
            return Status::failure("a result entry lacks stream or values");
        }
        LabelSet labels;
        for (const auto& [k, v] : s["stream"].items())
            if (v.is_string()) labels[k] = v.get<std::string>();
        const size_t idx = streams.size();
        streams.push_back(std::move(labels));
        for (const auto& v : s["values"]) {
            if (!v.is_array() || v.size() < 2 || !v[0].is_string() || !v[1].is_string()) {
                return Status::failure("a value is not [\"<ns>\", \"<line>\"]");
            }
            QueryEntry e;
            const std::string ts = v[0].get<std::string>();
            char* end = nullptr;
            e.ts_ns = std::strtoll(ts.c_str(), &end, 10);
            if (ts.empty() || *end != '\0') {
                return Status::failure("a timestamp is not nanoseconds: " + escape_line(utf8_prefix(ts, 64)));
            }
            e.line = v[1].get<std::string>();
            entries.emplace_back(idx, std::move(e));
        }
    }
    return Status::success();
}

Status parse_series_response(const std::string& body, std::vector<LabelSet>& series, size_t max) {
    const auto doc = nlohmann::json::parse(body, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) return Status::failure("response is not JSON");
    if (str(doc, "status") != "success") return Status::failure("status is not success");
    const auto data = doc.find("data");
    if (data == doc.end() || !data->is_array()) return Status::failure("data is not a list of label sets");
    for (const auto& s : *data) {
        if (!s.is_object()) return Status::failure("a series is not a label set");
        if (series.size() >= max) break;
        LabelSet labels;
        for (const auto& [k, v] : s.items())
            if (v.is_string()) labels[k] = v.get<std::string>();
        series.push_back(std::move(labels));
    }
    return Status::success();
}

}  // namespace jobtrail::loki
