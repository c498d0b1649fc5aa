#include <sys/stat.h>

#include <algorithm>
#include <utility>

#include "common/time.hpp"
#include "shipper/sources/file/file_source.hpp"
#include "shipper/sources/file/fingerprint.hpp"

namespace jobtrail::shipper {

void FileSource::close_file(Tracked& t) {
    if (!t.fd.valid()) return;
    struct stat st {};
    if (::fstat(t.fd.get(), &st) == 0) {
        t.size = static_cast<uint64_t>(st.st_size);
        t.mtime = st.st_mtim;
    }
    t.stale = t.read_off != t.size;  // not read to its end (or truncated): open it again for that
    t.closed_ns = realtime_ns();
    t.fd.reset();
    --open_;
}

FileSource::Files::iterator FileSource::forget(Files::iterator it) {
    if (it->second.fd.valid()) --open_;
    ++freed_;
    return files_.erase(it);
}

FileSource::Files::iterator FileSource::release_file(Files::iterator it) {
    close_file(it->second);
    const Tracked& t = it->second;
    released_[it->first] = {t.path, t.fingerprint, t.emitted_off, t.size, t.mtime, true, t.uid};
    return forget(it);
}

FileSource::Reopen FileSource::reopen(Tracked& t, SafeFile& f) {
    // The same safe open as the first time: the name is still the user's to change.
    f = open_read_safe(t.path);
    if (f.refused == Refusal::kMissing) return Reopen::kGone;
    if (f.refused != Refusal::kNone) return Reopen::kRefused;
    // Another inode under the name: ours was renamed or deleted (the scan will see which).
    if (f.st.st_dev != t.dev || f.st.st_ino != t.ino) return Reopen::kGone;
    // Our inode, but not our file: deleted and its number reused, or rewritten from its start.
    // An empty file has no fingerprint to tell: it is taken as new (nothing of it was read).
    if (!same_file(f.fd.get(), t.fingerprint) || (fingerprint_empty(t.fingerprint) && t.read_off == 0))
        return Reopen::kOther;
    t.fd = std::move(f.fd);
    ++open_;
    t.opened_ns = realtime_ns();
    t.stale = false;
    return Reopen::kOk;
}

void FileSource::make_room() {
    // Files waiting to be read again while every descriptor is taken: close as many of the
    // open ones, first those read to their end (least recently grown first), then those that
    // have had their turn longest, so that a user's hundred busy files cannot hold every slot.
    size_t waiting = 0;
    for (const auto& [k, t] : files_) waiting += !t.fd.valid() && t.stale;
    if (waiting == 0 || open_ + waiting <= cfg_.max_open_files) return;
    const size_t n = std::min(open_, open_ + waiting - cfg_.max_open_files);
    std::vector<Tracked*> open;
    open.reserve(open_);
    for (auto& [k, t] : files_)
        if (t.fd.valid()) open.push_back(&t);
    auto order = [](const Tracked* t) {
        const bool unread = t->read_off < t->size;
        return std::pair{unread, unread ? t->opened_ns : t->last_growth_ns};
    };
    std::partial_sort(open.begin(), open.begin() + static_cast<std::ptrdiff_t>(n), open.end(),
                      [&](const Tracked* a, const Tracked* b) { return order(a) < order(b); });
    for (size_t i = 0; i < n; ++i) close_file(*open[i]);
}

}  // namespace jobtrail::shipper
