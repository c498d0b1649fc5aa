#include "loki/query_back.hpp"

#include <algorithm>

namespace jobtrail::loki {
namespace {

constexpr int64_t kHourNs = 3'600'000'000'000;
constexpr int64_t kMaxPieceNs = kQueryBackMaxPieceNs;

}  // namespace

QueryResult query_back(Client& client, const std::string& logql, int64_t lo, int64_t hi, const QueryOptions& opts,
                       const std::function<void(const QueryEntry&)>& on_entry,
                       const std::function<bool(int64_t from, int64_t to)>& more,
                       const std::vector<std::string>& index_selectors, int64_t first_piece_ns) {
    QueryResult r;
    r.start_ns = lo;
    int64_t piece = std::clamp(first_piece_ns, kHourNs, kMaxPieceNs);
    // Whether the index holds any of the selectors' streams with entries in [from, to): a day
    // a piece (Loki's split_metadata_queries_by_interval), no line read. A failure says maybe.
    auto maybe_any = [&](int64_t from, int64_t to) {
        for (const auto& sel : index_selectors) {
            const auto s = series(client, sel, from, to, opts, 1);
            if (s.failed || !s.series.empty()) return true;
        }
        return index_selectors.empty();
    };
    for (int64_t to = hi; to > lo;) {
        const int64_t from = std::max(lo, to - piece);
        // The newest piece is read as it is: it nearly always holds records, and a short window
        // is only that piece.
        if (to != hi && !maybe_any(from, to)) {  // stepped over, not read an hour at a time
            r.start_ns = from;
            to = from;
            piece = std::min(piece * 2, kMaxPieceNs);
            continue;
        }
        const auto got = query_range(client, logql, from, to, opts, on_entry);
        r.entries += got.entries;
        r.requests += got.requests;
        r.truncated |= got.truncated;
        r.start_ns = from;
        if (got.failed) {
            r.failed = true;
            r.http_status = got.http_status;
            r.error = got.error;
            break;
        }
        if (!more(from, to)) break;
        to = from;
        // Each page after a piece's first asks Loki again for what is left of the piece, in as
        // many of its pieces: where records are dense (a page or more), pieces shrink instead.
        piece = got.entries >= static_cast<uint64_t>(opts.page_limit) ? std::max(piece / 2, kHourNs)
                                                                      : std::min(piece * 2, kMaxPieceNs);
    }
    return r;
}

}  // namespace jobtrail::loki
