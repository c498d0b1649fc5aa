#include <span>
#include <string>

#include "common/time.hpp"
#include "shipper/sender.hpp"

namespace jobtrail::shipper {
namespace {

uint64_t record_bytes(const spool::ReadBatch& b, const spool::RecordView& r) {
    // What Loki's rate limits count: the line and its structured metadata; and a byte an entry,
    // so that halving a cap after a 413 makes progress through blank lines too.
    if (r.run != spool::kNoRun) return b.run(r).line_bytes + b.run(r).metadata_bytes + b.run(r).count;
    uint64_t n = r.line.size() + 1;
    for (const auto& [k, v] : b.metadata(r)) n += k.size() + v.size();
    return n;
}

}  // namespace

bool Sender::build(const std::string& name, StreamState& s, uint64_t cap, Job& job) {
    const int64_t oldest = realtime_ns() - cfg_.max_age_ms * 1'000'000;
    // Sent as spooled: within the cap, nothing too old, and metadata only to a Loki that takes it.
    const auto as_is = [&](const spool::RunView& run) {
        return run.line_bytes + run.metadata_bytes + run.count <= cap && run.oldest_ts_ns >= oldest &&
               (!run.has_metadata || cfg_.structured_metadata);
    };
    while (!s.queue.empty()) {
        Piece& p = s.queue.front();
        const spool::ReadBatch& rb = p.batch->records;
        s.sent = {};
        s.sent_items = 0;
        s.partial = false;
        const bool runs = p.recs[p.next]->run != spool::kNoRun;
        if (runs && (s.run_done > 0 || !as_is(rb.run(*p.recs[p.next])))) {
            if (build_partial(name, s, cap, oldest, job)) return true;
            continue;  // all of that run was dropped
        }
        size_t i = p.next;
        if (runs) {
            // Whole runs, their compressed bytes as they are.
            push_runs_.clear();
            uint64_t raw = 0;
            for (; i < p.recs.size() && p.recs[i]->run != spool::kNoRun; ++i) {
                const uint64_t b = record_bytes(rb, *p.recs[i]);
                const spool::RunView& run = rb.run(*p.recs[i]);
                if (i > p.next && (s.sent.bytes + b > cap || !as_is(run))) break;
                s.sent.bytes += b;
                s.sent.line_bytes += run.line_bytes;
                s.sent.entries += run.count;
                raw += run.raw_size;
                push_runs_.push_back(run.elements());
            }
            loki::encode_push_runs(name, push_runs_, raw, job.body, &job.body_size);
        } else {
            push_streams_.resize(1);
            loki::StreamRef& ref = push_streams_[0];
            ref.labels = name;
            ref.entries.clear();
            for (; i < p.recs.size() && p.recs[i]->run == spool::kNoRun; ++i) {
                const spool::RecordView& r = *p.recs[i];
                const uint64_t b = record_bytes(rb, r);
                if (i > p.next && s.sent.bytes + b > cap) break;  // at least one entry per request
                s.sent.bytes += b;
                s.sent.line_bytes += r.line.size();
                ref.entries.push_back({r.ts_ns, r.line, nullptr, rb.metadata(r)});
            }
            s.sent.entries = ref.entries.size();
            loki::encode_push(push_streams_, cfg_.structured_metadata, push_scratch_, job.body, &job.body_size);
        }
        s.sent_items = i - p.next;
        return true;
    }
    return false;
}

bool Sender::build_partial(const std::string& name, StreamState& s, uint64_t cap, int64_t oldest, Job& job) {
    Piece& p = s.queue.front();
    const spool::RunView& run = p.batch->records.run(*p.recs[p.next]);
    run_records_.clear();
    run_metadata_.clear();
    // Decompressed again for each request it makes (at most a run's 64 KiB): kept, it would be
    // one more buffer per stream waiting on Loki.
    const bool decoded = [&] {
        std::string why;
        if (spool::expand_run(run, run_raw_, run_records_, run_metadata_, &why)) return true;
        drops_("spool_corrupt", run.count - s.run_done);
        events_.emit(Severity::kError, "sender", event::kSpoolCorrupt,
                     "a spooled run of " + std::to_string(run.count) + " records of " + name + " does not decode (" +
                         why + "); dropped");
        return false;
    }();
    push_streams_.resize(1);
    loki::StreamRef& ref = push_streams_[0];
    ref.labels = name;
    ref.entries.clear();
    // Too-old entries are skipped (counted when the request is answered for, or now if nothing
    // else is left), not sent one request each.
    size_t i = s.run_done;
    uint64_t skipped = 0;
    for (; decoded && i < run.count; ++i) {
        const spool::RecordView& r = run_records_[i];
        if (r.ts_ns < oldest) {
            ++skipped;
            continue;
        }
        const auto md = std::span<const spool::MetadataView>(run_metadata_).subspan(r.metadata_begin, r.metadata_count);
        uint64_t b = r.line.size() + 1;  // at least a byte, so halving a 413's cap always makes progress
        for (const auto& [k, v] : md) b += k.size() + v.size();
        if (!ref.entries.empty() && s.sent.bytes + b > cap) break;
        s.sent.bytes += b;
        s.sent.line_bytes += r.line.size();
        ref.entries.push_back({r.ts_ns, r.line, nullptr, md});
    }
    s.sent.entries = ref.entries.size();
    s.sent_consumed = static_cast<uint32_t>(i - s.run_done);
    s.sent_skipped = skipped;
    s.partial = true;
    if (!ref.entries.empty())
        loki::encode_push(push_streams_, cfg_.structured_metadata, push_scratch_, job.body, &job.body_size);
    // The views into them are done with: what one huge run grew is not kept.
    if (run_raw_.capacity() > 1 << 20) std::string().swap(run_raw_);
    if (run_records_.capacity() > 1 << 14) std::vector<spool::RecordView>().swap(run_records_);
    if (run_metadata_.capacity() > 1 << 14) std::vector<spool::MetadataView>().swap(run_metadata_);
    if (!ref.entries.empty()) return true;
    if (skipped) drops_("too_old", skipped);
    s.run_done = 0;
    advance(s, 1);
    return false;
}

}  // namespace jobtrail::shipper
