#include <algorithm>

#include "common/text.hpp"
#include "common/time.hpp"
#include "joblog/format.hpp"
#include "joblog/shipped.hpp"
#include "node/nccl_file.hpp"
#include "node/schema.hpp"
#include "shipper/sources/file/file_source.hpp"
#include "shipper/sources/file/fingerprint.hpp"
#include "shipper/sources/file/sanitize.hpp"

namespace jobtrail::shipper {

void FileSource::emit_line(Tracked& t, std::string_view raw, std::vector<Event>& out) {
    std::string_view text = raw;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (cfg_.format == LineFormat::kNccl || cfg_.format == LineFormat::kPlain) {
        // Every NCCL line: built in place, sanitized straight from the read buffer into a
        // recycled one.
        Event& e = out.emplace_back();
        e.origin = t.origin;
        if (cfg_.format == LineFormat::kNccl) {
            const node::NcclLine nccl(text);
            if (const auto ts = nccl.time(t.stamps)) e.ts_ns = own_time(t, *ts);
            // A line that says its host:pid needs nothing more (the step, said once, names its
            // file); any other line of the file carries the file's name.
            if (!t.nccl_prefix.empty()) {
                const auto said = nccl.text();
                if (!said || !said->starts_with(t.nccl_prefix))
                    e.metadata.emplace_back(node::metadata::kFile, t.file_name);
            }
        }
        if (e.ts_ns == 0) e.ts_ns = realtime_ns();
        if (!spare_lines_.empty()) {
            e.line.swap(spare_lines_.back());
            spare_lines_.pop_back();
            spare_bytes_ -= std::min(spare_bytes_, e.line.capacity());
        }
        sanitize_line(text, e.line);
        cut_long(e.line);
        return;
    }
    Event e;
    e.origin = t.origin;
    std::string line;
    switch (cfg_.format) {
        case LineFormat::kJoblog: {
            joblog::Line l;
            if (joblog::parse_line(text, l)) {
                e.ts_ns = l.ts_ns;
                line = joblog::make_shipped_line(t.phase, l.tag, l.name, l.text);
                e.metadata.emplace_back(node::metadata::kTag, std::string(l.tag));
            } else {
                line = std::string(text);
            }
            break;
        }
        case LineFormat::kCri: {
            const auto l = cri::parse(text);
            // After a restart from a held P piece: what was handed out already is skipped.
            if (t.cri.replayed(l ? &*l : nullptr, t.emitted_off)) return;
            if (!l) {
                line = std::string(text);  // not a CRI line: kept as it is, and counted
                ++m_.cri_malformed;
                break;
            }
            std::vector<cri::Joiner::Joined> done;
            t.cri.feed(*l, t.emitted_off, done);
            for (auto& j : done) emit_cri(t, std::move(j), out);
            return;
        }
        case LineFormat::kNccl:
        case LineFormat::kPlain:
            break;  // above
    }
    finish_line(std::move(e), std::move(line), out);
}

// NCCL stamps its lines to the microsecond, and threads of one process print the same line in
// one; a CRI runtime may stamp every line of one read alike. Counted from the file's content
// (the lines before it with the same stamp), a line's time is the same after a restart, so a
// re-send is byte-identical and Loki keeps it once.
int64_t FileSource::own_time(Tracked& t, int64_t stamp) {
    if (!t.run_checked) {
        t.run_checked = true;
        // Resumed from a checkpoint in the middle of a run: its lines before were counted then.
        if (auto r = saved_runs_.find(key_of(t.dev, t.ino)); r != saved_runs_.end()) {
            if (t.emitted_off >= r->second.offset && t.fd.valid() && same_file(t.fd.get(), r->second.fp)) {
                t.run_stamp = r->second.stamp;
                t.run_count = r->second.count;
            }
            saved_runs_.erase(r);
        }
    }
    if (t.run_count > 0 && stamp == t.run_stamp) return stamp + static_cast<int64_t>(t.run_count++);
    t.run_stamp = stamp;
    t.run_count = 1;
    return stamp;
}

void FileSource::cut_long(std::string& line) {
    if (line.size() <= max_line_) return;
    const std::string_view keep = utf8_prefix(line, max_line_ - 64);
    line = std::string(keep) + " [jobtrail: line truncated, " + std::to_string(line.size() - keep.size()) +
           " bytes dropped]";
    drops_("truncated_lines_kept");
}

void FileSource::recycle(std::vector<Event>& done) {
    // Only the formats that take them back out (NCCL, plain); about one pass of lines, a long
    // line's buffer let go.
    if (cfg_.format != LineFormat::kNccl && cfg_.format != LineFormat::kPlain) return;
    constexpr size_t kMaxSpareBytes = 1 << 20, kMaxSpareCapacity = 1024;
    for (auto& e : done) {
        if (spare_bytes_ >= kMaxSpareBytes) break;
        if (e.line.capacity() > kMaxSpareCapacity) continue;
        spare_bytes_ += e.line.capacity();
        spare_lines_.push_back(std::move(e.line));
    }
}

void FileSource::emit_cri(Tracked& t, cri::Joiner::Joined j, std::vector<Event>& out) {
    Event e;
    e.origin = t.origin;
    if (j.ts_ns != 0) e.ts_ns = own_time(t, j.ts_ns);
    e.metadata.emplace_back(node::metadata::kStream, std::move(j.stream));
    if (j.cut) ++m_.cri_lines_cut;
    finish_line(std::move(e), std::move(j.text), out);
}

void FileSource::drain_cri(Tracked& t, std::vector<Event>& out) {
    if (!t.cri.holding()) return;
    std::vector<cri::Joiner::Joined> held;
    t.cri.take_all(held);
    for (auto& j : held) emit_cri(t, std::move(j), out);
}

void FileSource::finish_line(Event e, std::string line, std::vector<Event>& out) {
    if (e.ts_ns == 0) e.ts_ns = realtime_ns();
    cut_long(line);
    e.line = sanitize_line(line);
    out.push_back(std::move(e));
}

}  // namespace jobtrail::shipper
