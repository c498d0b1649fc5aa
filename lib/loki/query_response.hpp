#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.hpp"

namespace jobtrail::loki {

using LabelSet = std::map<std::string, std::string>;

// The label Loki's automatic stream sharding (shard_streams, on by default) adds to the streams it
// splits a fast stream into; query_range() leaves it out: shards are one stream.
inline constexpr std::string_view kStreamShardLabel = "__stream_shard__";

// One log line as query_range returns it. Without the categorize-labels flag Loki folds
// structured metadata into the labels, so `labels` holds both.
struct QueryEntry {
    int64_t ts_ns = 0;
    std::string line;
    const LabelSet* labels = nullptr;  // valid during the callback
};

// Parses one query_range response body (resultType "streams") into entries, in response order.
// Fails, saying what was wrong, when the body is not a streams result.
Status parse_streams_response(const std::string& body, std::vector<LabelSet>& streams,
                              std::vector<std::pair<size_t, QueryEntry>>& entries);

// Parses one /loki/api/v1/series response body ({"status":"success","data":[{labels}...]}) into
// label sets, appending at most `max` of them in all. Fails, saying what was wrong, when the body
// is not a series answer.
Status parse_series_response(const std::string& body, std::vector<LabelSet>& series, size_t max);

}  // namespace jobtrail::loki
