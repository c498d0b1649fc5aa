#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "loki/query.hpp"

namespace jobtrail::loki {

inline constexpr int64_t kQueryBackDayNs = 86'400'000'000'000;
// 30 days: one request under Loki's default max_query_length (721h); a 32-day piece was two.
inline constexpr int64_t kQueryBackMaxPieceNs = 30 * kQueryBackDayNs;

// A long window from its newest records back: a day, then two, four..., at most 30 days a
// piece (half the last, down to an hour, after one that filled a page), each piece forward in
// time (query_range). After each piece `more(from, to)` says whether to go on: a caller that has
// what it needs (the job's run, a view's limits) stops, so a 400-day window costs Loki (one
// piece per split_queries_by_interval) only what the answer needs, and a dense range is not
// asked for again page after page. Stops at the first failed piece. The result's start_ns is
// where the last piece asked began: `lo` when the range was exhausted (or empty).
// With `index_selectors` (stream selectors, no line filter), Loki's index (series, a day a
// piece, no line read) is asked first whether any of them holds entries in each piece after the
// newest: one that holds none is stepped over, neither queried nor given to `more`. A site's
// Loki that keeps 30 days is not read for 370 empty ones an hour at a time. A caller that reads
// the whole window whatever it finds (xid) starts at kQueryBackMaxPieceNs: small first pieces
// would only leave Loki's queriers idle.
QueryResult query_back(Client& client, const std::string& logql, int64_t lo, int64_t hi, const QueryOptions& opts,
                       const std::function<void(const QueryEntry&)>& on_entry,
                       const std::function<bool(int64_t from, int64_t to)>& more,
                       const std::vector<std::string>& index_selectors = {}, int64_t first_piece_ns = kQueryBackDayNs);

}  // namespace jobtrail::loki
