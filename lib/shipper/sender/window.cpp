#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/time.hpp"
#include "shipper/sender.hpp"

namespace jobtrail::shipper {

// Reads batches into the window; true if it read any.
bool Sender::fill_window() {
    bool any = false;
    // Beyond the front batch kWindowBytes; while a stream of the window waits (paced, backing
    // off) up to kWindowBatches, so that the other streams' lines behind its go on.
    const int64_t now = monotonic_ns();
    const bool waiting = std::any_of(streams_.begin(), streams_.end(), [&](const auto& kv) {
        return !kv.second.queue.empty() && kv.second.policy.next_try_ns > now;
    });
    const auto room = [&] {
        if (window_.size() >= kWindowBatches) return false;
        if (window_.size() < 2 || waiting) return true;
        return window_bytes_ - window_.front().records.bytes() < kWindowBytes;
    };
    while (room()) {
        if (spare_.empty()) spare_.emplace_back();
        Batch& batch = spare_.front();
        batch.open_pieces = 0;
        if (spool_.read(batch.records, 100'000, cfg_.batch_max_bytes, batch.end) == 0) break;
        any = true;
        window_bytes_ += batch.records.bytes();
        window_.splice(window_.end(), spare_, spare_.begin());
        // Entries Loki would reject as too old forever are dropped, counted, instead of retried.
        const int64_t oldest = realtime_ns() - cfg_.max_age_ms * 1'000'000;
        // Group by stream in the spool's order; lines of one stream mostly come in runs. A
        // compressed run's too-old entries are dropped when it is sent.
        std::vector<std::pair<std::string_view, Piece>> order;
        std::string_view last_stream;
        size_t last = 0;
        for (const auto& r : batch.records.records()) {
            if (r.run == spool::kNoRun && r.ts_ns < oldest) {
                drops_("too_old");
                continue;
            }
            // A run's records share one view of its stream: same bytes, no compare needed.
            const bool same = last_stream.data() == r.stream.data() && last_stream.size() == r.stream.size();
            if (order.empty() || (!same && last_stream != r.stream)) {
                auto it = std::find_if(order.begin(), order.end(), [&](const auto& p) { return p.first == r.stream; });
                if (it == order.end()) {
                    order.push_back({r.stream, Piece{&batch, {}, 0}});
                    it = order.end() - 1;
                }
                last = static_cast<size_t>(it - order.begin());
            }
            last_stream = r.stream;  // this frame's view, so its next records need no compare
            order[last].second.recs.push_back(&r);
        }
        for (auto& [stream, piece] : order) {
            auto it = streams_.find(stream);
            if (it == streams_.end()) it = streams_.emplace(std::string(stream), StreamState{}).first;
            it->second.queue.push_back(std::move(piece));
            it->second.last_active_ns = monotonic_ns();
            ++batch.open_pieces;
        }
    }
    return any;
}

void Sender::advance(StreamState& s, size_t items) {
    Piece& p = s.queue.front();
    p.next += items;
    if (p.next >= p.recs.size()) {
        --p.batch->open_pieces;
        s.queue.pop_front();
    }
}

// What is in flight for the stream is answered for.
void Sender::settle(StreamState& s) {
    if (s.partial) {
        const Piece& p = s.queue.front();
        if (s.sent_skipped) drops_("too_old", s.sent_skipped);
        s.run_done += s.sent_consumed;
        if (s.run_done < p.batch->records.run(*p.recs[p.next]).count) return;
        s.run_done = 0;
        advance(s, 1);
        return;
    }
    advance(s, s.sent_items);
}

// Acknowledges the spool up to the first record not yet answered for: past the batches wholly
// answered, and inside the front one up to the frame of its first record still waiting. A batch
// is read by spool bytes, which are compressed: one megabyte was ~80,000 lines and 8 s of a
// paced stream, all of it sent again after a kill -9 when only batch ends were acknowledged.
void Sender::ack_done() {
    spool::Position end;
    bool any = false;
    while (!window_.empty() && window_.front().open_pieces == 0) {
        end = window_.front().end;
        window_bytes_ -= window_.front().records.bytes();
        any = true;
        // Kept for the next read, within the window's bound.
        if (spare_.empty())
            spare_.splice(spare_.end(), window_, window_.begin());
        else
            window_.pop_front();
    }
    if (!window_.empty()) {
        // A stream's piece of the front batch, if it has one, is the front of its queue.
        const Batch& front = window_.front();
        const auto& recs = front.records.records();
        size_t first = recs.size();
        for (const auto& [name, s] : streams_)
            if (!s.queue.empty() && s.queue.front().batch == &front)
                first = std::min(first, static_cast<size_t>(s.queue.front().recs[s.queue.front().next] - recs.data()));
        if (first < recs.size() && (!any || end < front.records.frame_start(first))) {
            end = front.records.frame_start(first);
            any = true;
        }
    }
    if (any && acked_ < end) {
        if (auto st = spool_.ack(end); !st.ok)
            // Not fatal: Loki has the records; after a restart they are sent again and dropped
            // by Loki as duplicates.
            events_.emit(Severity::kWarning, "sender", event::kAckFailed, "spool: " + st.error);
        else
            acked_ = end;
    }
    lanes_m_.oldest_pending_ns[lane_index(lane_)] =
        window_.empty() || window_.front().records.empty() ? 0 : window_.front().records.records().front().ts_ns;
}

// The map stays the size of what is pending, plus the streams whose learned rate is recent: a
// node sees a new NCCL stream per job, for months.
void Sender::forget_idle(int64_t now) {
    for (auto it = streams_.begin(); it != streams_.end();) {
        const StreamState& s = it->second;
        const bool idle = !s.in_flight && s.queue.empty() && s.policy.next_try_ns <= now;
        if (idle && (!s.policy.rate_bps || now - s.last_active_ns > kForgetIdleNs))
            it = streams_.erase(it);
        else
            ++it;
    }
}

}  // namespace jobtrail::shipper
