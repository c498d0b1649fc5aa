#include "collector/kernel_snapshot.hpp"

#include <unistd.h>

#include <deque>

#include "common/fs.hpp"
#include "common/time.hpp"
#include "joblog/format.hpp"
#include "kmsg/merge.hpp"
#include "node/job_state.hpp"

namespace jobtrail::collector {
namespace {

// Stamped now, like every line of the file, with the record's own time in the line: a kernel
// time hours behind the file's other lines is one Loki drops (too far behind the stream's newest).
void write_record(joblog::Writer& log, std::string_view tag, const kmsg::Record& r, const kmsg::BootClock& clock) {
    log.line_now(tag, "", kmsg::format_header_line(r, clock.record_ns(r.usec, r.seq)));
    for (const auto& [k, v] : r.dict) log.line_now(joblog::kKmsgDict, "", k + "=" + v);
}

}  // namespace

void record_kernel_mark(Session& s) {
    const auto& cc = s.config().collector;
    const auto& clock = s.clock();
    std::deque<std::string> tail;  // raw records; parsed only if kept
    const size_t keep = static_cast<size_t>(cc.context_records);
    const auto scan = scan_ring(
        cc.kmsg_path, cc.kmsg_budget_ms,
        [&](std::string_view raw, uint64_t) {
            if (keep == 0) return;
            if (tail.size() == keep) tail.pop_front();
            tail.emplace_back(raw);
        },
        [](uint64_t) {});
    if (!scan.ok) {
        s.notice("error",
                 "kernel log: " + scan.error + "; no kmsg mark for this job (the epilog will use its start time)");
        return;
    }
    if (scan.budget_exhausted)
        s.notice("warning",
                 "kernel log: stopped reading after kmsg_budget=" + std::to_string(cc.kmsg_budget_ms) + "ms");

    node::KmsgMark mark;
    mark.boot_id = clock.boot_id();
    mark.next_seq = scan.any ? scan.last_seq + 1 : 0;
    mark.start_ns = s.start_ns();

    const int64_t oldest_ns = s.start_ns() - cc.context_ms * 1'000'000;
    kmsg::FragmentMerger merger;
    std::vector<kmsg::Record> merged;
    for (const auto& raw : tail) {
        kmsg::Record r;
        kmsg::ParseError perr;
        if (!kmsg::parse_record(raw, r, perr)) continue;
        if (clock.wall_ns(r.usec) < oldest_ns) continue;
        merger.push(std::move(r), merged);
    }
    merger.flush(merged);
    for (const auto& r : merged) write_record(s.log(), joblog::kKmsgContext, r, clock);
    s.log().line(realtime_ns(), joblog::kMeta, "",
                 "kmsg_mark=" + std::to_string(mark.next_seq) + " kmsg_records_scanned=" +
                     std::to_string(scan.records) + " kmsg_context_records=" + std::to_string(merged.size()));
    s.log().flush();

    const node::Layout layout = cc.layout();
    if (auto st = make_dirs(layout.kmsg_marks_dir(), 0755); !st.ok) {
        s.notice("error", "cannot save kmsg mark: " + st.error);
        return;
    }
    if (auto st = write_file_atomic(layout.kmsg_mark(s.facts().job_id), node::to_json(mark), 0644); !st.ok)
        s.notice("error", "cannot save kmsg mark: " + st.error);
}

std::vector<EventHit> record_kernel_delta(Session& s, const events::Extractor& ex) {
    const auto& cc = s.config().collector;
    const auto& clock = s.clock();
    auto& log = s.log();
    const node::Layout layout = cc.layout();
    const std::string mark_path = layout.kmsg_mark(s.facts().job_id);

    // Where the job starts in the ring: the prolog's mark, else the job's start time.
    std::optional<node::KmsgMark> mark;
    if (auto text = read_small_file(mark_path, 4096)) mark = node::parse_kmsg_mark(*text);
    int64_t since_ns = 0;
    std::string basis;
    if (mark && mark->boot_id == clock.boot_id()) {
        basis = "mark seq=" + std::to_string(mark->next_seq);
    } else {
        if (mark) {
            s.notice("warning", "kmsg mark is from another boot (node rebooted during the job); using the whole ring");
            basis = "whole ring (rebooted)";
        } else {
            // No mark: the prolog could not read kmsg or did not run. Use the job marker's start.
            if (auto m = node::read_job_marker(layout, s.facts().job_id)) since_ns = m->start_ns;
            basis = since_ns ? "job start time " + format_rfc3339_ns(since_ns) : "whole ring (no mark, no start time)";
            s.notice("warning", "no kmsg mark for this job; using " + basis);
        }
        mark.reset();
    }

    // Whose each record was: this job's marker (still there: the epilog removes it last), the
    // markers of the jobs running beside it and of those that ended within the hour. Read again
    // after the scan (a neighbour's prolog may write its GPUs meanwhile), and the records judged
    // then; running ones first each time: a neighbour's epilog writes its ended marker before it
    // removes the running one, so a job ending meanwhile is seen in one or the other (a running
    // marker overrides an ended one of the same id).
    devices::Attributor attributor(cc.slurm_cgroup_roots);
    const auto read_markers = [&] {
        const auto running = node::read_job_markers(layout);
        for (const auto& m : node::read_ended_markers(layout))
            attributor.upsert(m.job_id, m.uid, m.start_ns, m.end_ns, m.devices, m.devices_note);
        for (const auto& m : running) attributor.upsert(m.job_id, m.uid, m.start_ns, 0, m.devices, m.devices_note);
    };
    read_markers();
    EventTally tally(ex);
    tally.attribute_with(&attributor, s.facts().job_id);
    kmsg::FragmentMerger merger;
    std::vector<kmsg::Record> done;
    // Held for judging after the scan; bounded (a ring is at most a few MiB): past it, judged at
    // once with the markers read before.
    constexpr size_t kMaxHeldBytes = 32u << 20;
    std::vector<std::pair<kmsg::Record, int64_t>> held;
    size_t held_bytes = 0;
    uint64_t written = 0;
    bool first = true;
    auto emit = [&](std::vector<kmsg::Record>& recs) {
        for (auto& r : recs) {
            write_record(log, joblog::kKmsg, r, clock);
            const int64_t ns = clock.record_ns(r.usec, r.seq);
            if (held_bytes < kMaxHeldBytes) {
                held_bytes += r.message.size() + sizeof r;
                held.emplace_back(std::move(r), ns);
            } else {
                for (const auto& [hr, hns] : held) tally.add(hr, hns);
                held.clear();
                tally.add(r, ns);
            }
            ++written;
        }
        recs.clear();
    };
    const auto scan = scan_ring(
        cc.kmsg_path, cc.kmsg_budget_ms,
        [&](std::string_view raw, uint64_t seq) {
            if (mark && seq < mark->next_seq) return;
            kmsg::Record r;
            kmsg::ParseError perr;
            if (!kmsg::parse_record(raw, r, perr)) {
                log.line(realtime_ns(), joblog::kJobtrail, "",
                         "warning: unparsable kernel record (" + perr.what + "): " + std::string(raw.substr(0, 200)));
                return;
            }
            if (!mark && since_ns && clock.wall_ns(r.usec) < since_ns) return;
            if (first && mark && seq > mark->next_seq) {
                log.line_now(joblog::kKmsgLost, "",
                             "lost=" + std::to_string(seq - mark->next_seq) +
                                 " reason=\"kernel ring wrapped before the epilog read it\" first_seq=" +
                                 std::to_string(mark->next_seq));
            }
            first = false;
            merger.push(std::move(r), done);
            emit(done);
        },
        [&](uint64_t lost) {
            log.line(realtime_ns(), joblog::kKmsgLost, "",
                     "lost=" + std::to_string(lost) + " reason=\"kernel ring overrun while reading\"");
        });
    merger.flush(done);
    emit(done);
    if (held_bytes < kMaxHeldBytes) read_markers();
    for (const auto& [r, ns] : held) tally.add(r, ns);
    held.clear();
    if (!scan.ok) s.notice("error", "kernel log: " + scan.error);
    if (scan.budget_exhausted)
        s.notice("warning",
                 "kernel log: stopped reading after kmsg_budget=" + std::to_string(cc.kmsg_budget_ms) + "ms");

    // Forced past the size cap: the events are the point of the epilog log.
    // Stamped now; first_time= in the text is the kernel's time.
    for (const auto& h : tally.hits()) log.line_now(joblog::kEvent, "", describe_hit(h), /*force=*/true);
    using events::Severity;
    log.line(realtime_ns(), joblog::kEvent, "summary",
             "basis=\"" + basis + "\" kmsg_records=" + std::to_string(written) +
                 " fatal=" + std::to_string(tally.count(Severity::kFatal)) +
                 " error=" + std::to_string(tally.count(Severity::kError)) +
                 " warning=" + std::to_string(tally.count(Severity::kWarning)) +
                 " info=" + std::to_string(tally.count(Severity::kInfo)),
             /*force=*/true);
    log.flush();
    ::unlink(mark_path.c_str());
    return tally.hits();
}

}  // namespace jobtrail::collector
