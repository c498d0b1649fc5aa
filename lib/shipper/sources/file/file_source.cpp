#include "shipper/sources/file/file_source.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <utility>

#include "common/time.hpp"
#include "shipper/sources/file/fingerprint.hpp"

namespace jobtrail::shipper {

FileSource::FileSource(FileSourceConfig cfg, FileSourceOptions o, Metrics& m)
    : cfg_(std::move(cfg)),
      node_(std::move(o.node)),
      max_line_(o.max_line),
      m_(m.group<FileSourceMetrics>()),
      drops_(m.group<Drops>()),
      idle_ns_(o.idle_ms * 1'000'000),
      scan_interval_ns_(o.scan_interval_ms * 1'000'000),
      events_(std::move(o.events)),
      labeler_(o.labeler ? std::move(o.labeler) : contract_labeler(cfg_.format, cfg_.stream)),
      idle_close_ns_(cfg_.idle_close_ms * 1'000'000),
      release_ns_(cfg_.release_after_ms * 1'000'000) {}

bool FileSource::poll(std::vector<Event>& out, size_t max_bytes) {
    // Listing a directory a user filled costs one lstat per entry: not on every pass.
    if (const int64_t now = monotonic_ns(); first_scan_ || now - last_scan_ns_ >= scan_interval_ns_) {
        last_scan_ns_ = now;
        scan();
    }
    const int64_t started = realtime_ns();
    make_room();
    size_t budget = max_bytes;
    backlog_ = 0;
    size_t waiting = 0;
    uint64_t held = 0;
    // The pass is shared by the files' owners, not by files or jobs: each owner may first read
    // its share (a user's ten jobs' bursts, listed first, do not keep another user's line for a
    // later pass); what an owner leaves unread goes to the others after.
    std::map<uid_t, size_t> share;
    for (const auto& [path, t] : files_) share.emplace(t.uid, 0);
    for (auto& [uid, left] : share) left = std::max<size_t>(max_bytes / share.size(), 1);
    bool held_back = false;               // an owner stopped at its share with more to read
    std::map<uid_t, size_t> released_of;  // released files by owner, counted once a file is idle
    const auto read_share = [&](Tracked& t) {
        size_t& left = share[t.uid];
        size_t allowed = std::min(budget, left);
        const size_t before = allowed;
        read_file(t, out, allowed);
        budget -= before - allowed;
        left -= before - allowed;
        held_back |= allowed == 0 && budget > 0;
    };
    // Files gone from the globs first: renamed away by a rotation, they hold the older lines,
    // which must not come out (and be stamped) after the new file's.
    for (int round = 0; round < 2; ++round)
        for (auto it = files_.begin(); it != files_.end();) {
            Tracked& t = it->second;
            if (t.seen != (round == 1)) {
                ++it;
                continue;
            }
            // Not one make_room just closed: those that waited longer go first.
            if (!t.fd.valid() && t.stale && open_ < cfg_.max_open_files && t.closed_ns < started) {
                SafeFile f;
                switch (reopen(t, f)) {
                    case Reopen::kOk:
                        break;
                    case Reopen::kGone:
                        t.stale = false;  // what is left of it is not ours to read
                        break;
                    case Reopen::kOther:
                        // Read from its start as the new file it is, labelled by its name; what
                        // was read of the old one is shipped first.
                        if (!t.partial.empty()) take_partial(t, out);
                        drain_cri(t, out);
                        t.cri.clear();
                        saved_.erase(it->first);
                        saved_paths_.erase(it->first);
                        t.fd = std::move(f.fd);
                        ++open_;
                        t.uid = f.st.st_uid;
                        t.read_off = t.emitted_off = 0;
                        t.fingerprint = fingerprint(t.fd.get(), static_cast<uint64_t>(f.st.st_size));
                        t.stale = false;
                        t.opened_ns = realtime_ns();
                        label(t, stream_of(t.path));
                        break;
                    case Reopen::kRefused:
                        // Hard-linked or given away since: not read, but its position kept in case
                        // it comes back as it was.
                        refuse(t.path, f, t.ino);
                        saved_[it->first] = {t.fingerprint, t.emitted_off};
                        saved_paths_[it->first] = t.path;
                        if (t.run_count)
                            saved_runs_[it->first] = {t.fingerprint, t.emitted_off, t.run_stamp, t.run_count};
                        it = forget(it);
                        continue;
                }
            }
            read_share(t);
            if (struct stat st{}; t.fd.valid() && ::fstat(t.fd.get(), &st) == 0)
                t.size = static_cast<uint64_t>(st.st_size);
            const bool at_end = t.fd.valid() ? t.read_off >= t.size : !t.stale;
            if (!at_end && t.size > t.read_off) backlog_ += static_cast<int64_t>(t.size - t.read_off);
            waiting += !t.fd.valid() && t.stale;
            // Gone from the globs (renamed away or deleted) and read to its end: done with it.
            // A CRI line it left without its F (the runtime went on in the new file) is shipped
            // as it is; its rest comes as a line of the new file.
            if (!t.seen && at_end && t.partial.empty()) {
                drain_cri(t, out);
                it = forget(it);
                continue;
            }
            // Not grown for a while: its descriptor back, its position kept.
            if (t.fd.valid() && at_end && realtime_ns() - t.last_growth_ns > idle_close_ns_) close_file(t);
            // Not grown for much longer (its job over): its slot back too. Bounded per owner, so
            // that a user's old files cannot grow what is remembered of them without end, nor
            // stop other users' files being released. An owner at the cap keeps their idle file
            // tracked (in their own share) rather than evicting an older released one: a file
            // still there whose entry is forgotten is found again by the next scan as a new
            // file and read from 0, every line twice. Entries of deleted files go at each scan.
            if (t.seen && at_end && !t.fd.valid() && !t.stale && t.partial.empty() && !t.cri.holding() &&
                realtime_ns() - t.last_growth_ns > release_ns_) {
                if (released_of.empty())
                    for (const auto& [k, r] : released_) ++released_of[r.uid];
                // Root's are the site's own files, not counted in a share elsewhere either.
                if (size_t& n = released_of[t.uid]; n < (t.uid == 0 ? cfg_.max_files : cfg_.max_files_per_owner)) {
                    ++n;
                    it = release_file(it);
                    continue;
                }
            }
            held += t.partial.size() + t.cri.held_bytes();
            ++it;
        }
    // The pass's rest to whoever has more, in the same order: a file renamed away is read to its
    // end before the file that took its name (read_file stops short of a file's end only when
    // the budget is spent, or the file shrank).
    for (int round = 0; held_back && round < 2; ++round)
        for (auto& [path, t] : files_) {
            if (budget == 0 || t.seen != (round == 1) || !t.fd.valid() || t.read_off >= t.size) continue;
            read_file(t, out, budget);
        }
    if (held > cfg_.max_partial_bytes) cut_partials(out, held);
    if (cut_unsaid_ && (cut_said_ns_ == 0 || monotonic_ns() - cut_said_ns_ >= 10'000'000'000)) {
        cut_said_ns_ = monotonic_ns();
        events_.emit(Severity::kWarning, cfg_.name, event::kPartialLinesCut,
                     "shipped " + std::to_string(cut_unsaid_) + " unterminated lines (" +
                         std::to_string(cut_bytes_unsaid_) + " bytes) before their end: its files held more than " +
                         std::to_string(cfg_.max_partial_bytes) +
                         " bytes of lines without newline (max_partial_bytes); the rest of each follows as a new line");
        cut_unsaid_ = cut_bytes_unsaid_ = 0;
    }
    // Files waiting for a descriptor: another pass soon, not after the idle sleep.
    return budget == 0 || waiting > 0;
}

void FileKind::declare_metrics(metrics::Registry& m) {
    m.group<FileSourceMetrics>();
}

void FileKind::build(const SourceContext& c, const Config& files, Sources& out) {
    for (const auto& f : files) out.push_back(std::make_unique<FileSource>(f, FileSourceOptions::of(c), c.metrics));
}

}  // namespace jobtrail::shipper
