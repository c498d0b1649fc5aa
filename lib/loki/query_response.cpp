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

bool parse_streams_response(const std::string& body, std::vector<LabelSet>& streams,
                            std::vector<std::pair<size_t, QueryEntry>>& entries, std::string& err) {
    const auto doc = nlohmann::json::parse(body, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) {
        err = "response is not JSON";
        return false;
    }
    if (str(doc, "status") != "success") {
        err = "status is not success";
        return false;
    }
    const auto data = doc.find("data");
    if (data == doc.end() || !data->is_object() || str(*data, "resultType") != "streams") {
        err = "data.resultType is not streams (a metric query?)";
        return false;
    }
    const auto result = data->find("result");
    if (result == data->end() || !result->is_array()) {
        err = "data.result is not a list";
        return false;
    }
    for (const auto& s : *result) {
        if (!s.is_object() || !s.contains("stream") || !s["stream"].is_object() || !s.contains("values") ||
            !s["values"].is_array()) {
            err = "a result entry lacks stream or values";
            return false;
        }
        LabelSet labels;
        for (const auto& [k, v] : s["stream"].items())
            if (v.is_string()) labels[k] = v.get<std::string>();
        const size_t idx = streams.size();
        streams.push_back(std::move(labels));
        for (const auto& v : s["values"]) {
            if (!v.is_array() || v.size() < 2 || !v[0].is_string() || !v[1].is_string()) {
                err = "a value is not [\"<ns>\", \"<line>\"]";
                return false;
            }
            QueryEntry e;
            const std::string ts = v[0].get<std::string>();
            char* end = nullptr;
            e.ts_ns = std::strtoll(ts.c_str(), &end, 10);
            if (ts.empty() || *end != '\0') {
                err = "a timestamp is not nanoseconds: " + escape_line(utf8_prefix(ts, 64));
                return false;
            }
            e.line = v[1].get<std::string>();
            entries.emplace_back(idx, std::move(e));
        }
    }
    return true;
}

}  // namespace jobtrail::loki
