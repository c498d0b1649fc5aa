#include <glob.h>
#include <sys/stat.h>

#include <cerrno>
#include <set>
#include <utility>

#include "common/time.hpp"
#include "shipper/sources/file/file_source.hpp"
#include "shipper/sources/file/fingerprint.hpp"

namespace jobtrail::shipper {

void FileSource::scan() {
    // A glob that fails (EMFILE, ENOMEM, an unreadable directory) says nothing about which files
    // exist: keep tracking what we have rather than forget it and read it again from 0.
    // Sorted, so that under a cap the same files win after a restart. A directory that is not
    // there is no error; any other failure to read one (EMFILE) is.
    static thread_local int glob_errno = 0;
    glob_errno = 0;
    auto on_error = [](const char*, int e) -> int {
        if (e == ENOENT || e == ENOTDIR) return 0;
        glob_errno = e;
        return 1;
    };
    std::vector<glob_t> found(cfg_.paths.size());
    bool failed = false;
    for (size_t i = 0; i < cfg_.paths.size(); ++i) {
        const int rc = ::glob(cfg_.paths[i].c_str(), GLOB_BRACE, on_error, &found[i]);
        failed |= rc != 0 && rc != GLOB_NOMATCH;
    }
    if (failed) {
        for (auto& g : found) globfree(&g);
        if (!glob_failed_)
            events_.emit(Severity::kWarning, cfg_.name, event::kGlobFailed,
                         "cannot list the files of " + cfg_.paths.front() +
                             "...: " + (glob_errno ? errno_text(glob_errno) : std::string("out of memory")) +
                             "; keeping the files already tracked");
        glob_failed_ = true;
        return;
    }
    glob_failed_ = false;
    for (auto& [k, t] : files_) t.seen = false;
    std::map<std::string, size_t> per_dir;
    std::map<uid_t, size_t> per_owner;
    for (const auto& [k, t] : files_) {
        ++per_dir[dir_of(t.path)];
        if (t.uid != 0) ++per_owner[t.uid];
    }
    for (auto& g : found) {
        for (size_t i = 0; i < g.gl_pathc; ++i) scan_path(g.gl_pathv[i], per_dir, per_owner);
        globfree(&g);
    }
    std::set<std::string> dirs;
    for (const auto& [k, t] : files_) dirs.insert(dir_of(t.path));
    watch_.update(dirs);
    if (first_scan_) {
        first_scan_ = false;
        find_renamed();
        saved_paths_.clear();  // needed by find_renamed only
    }
    find_moved();
    refused_.swap(refused_now_);
    refused_now_.clear();
    say_refused();
}

void FileSource::scan_path(const std::string& path, std::map<std::string, size_t>& per_dir,
                           std::map<uid_t, size_t>& per_owner) {
    struct stat st {};
    // lstat: a symlink is refused (and counted) when adopted, never followed.
    if (::lstat(path.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) return;
    if (auto r = refused_.find(path); r != refused_.end() && r->second.ino == st.st_ino &&
                                      r->second.why != Refusal::kTooMany && r->second.why != Refusal::kOwnerShare) {
        refused_now_.insert(*r);  // the same entry, refused before: not opened again
        ++per_dir[dir_of(path)];
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        // Counts against its directory's cap like a file: past it, not even opened.
        size_t& in_dir = per_dir[dir_of(path)];
        if (in_dir >= cfg_.max_files_per_dir) {
            SafeFile over;
            over.refused = Refusal::kTooMany;
            refuse(path, over, st.st_ino);
        } else {
            refuse(path, open_read_safe(path), st.st_ino);
        }
        ++in_dir;
        return;
    }
    const std::string key = key_of(st.st_dev, st.st_ino);
    auto it = files_.find(key);
    if (it != files_.end()) {
        Tracked& t = it->second;
        t.seen = true;
        t.path = path;
        // Closed: the scan's lstat says whether it changed. Opened again by poll,
        // as descriptors allow.
        if (!t.fd.valid() && (static_cast<uint64_t>(st.st_size) != t.size || !same_time(st.st_mtim, t.mtime))) {
            t.stale = true;
            t.size = static_cast<uint64_t>(st.st_size);
            t.mtime = st.st_mtim;
        }
        return;
    }
    auto stream = labeler_(path);
    if (!stream.ok) {
        SafeFile odd;
        odd.refused = Refusal::kUnexpectedName;
        odd.error = stream.error;
        refuse(path, odd, st.st_ino);
        return;
    }
    size_t& in_dir = per_dir[dir_of(path)];
    // An owner past their share is refused for that first, so that the reason stays
    // the same from scan to scan (and is counted once) as the source fills.
    if (st.st_uid != 0 && per_owner[st.st_uid] >= cfg_.max_files_per_owner) {
        SafeFile over;
        over.refused = Refusal::kOwnerShare;
        if (refuse(path, over, st.st_ino)) ++owner_over_now_[st.st_uid];
        return;
    }
    if (files_.size() >= cfg_.max_files || in_dir >= cfg_.max_files_per_dir) {
        SafeFile over;
        over.refused = Refusal::kTooMany;
        over.error = path + ": over the limit of " +
                     std::to_string(files_.size() >= cfg_.max_files ? cfg_.max_files : cfg_.max_files_per_dir) +
                     (files_.size() >= cfg_.max_files ? " files for this source" : " files in its directory");
        refuse(path, over, st.st_ino);
        return;
    }
    if (adopt(path, st, true, std::move(stream.value)) && st.st_uid != 0) ++per_owner[st.st_uid];
    ++in_dir;
}

// What this scan refused beyond the ten it said one by one, in a line per reason.
void FileSource::say_refused() {
    if (unsaid_now_)
        events_.emit(Severity::kWarning, cfg_.name, event::kFileRefused,
                     "not reading " + std::to_string(unsaid_now_) +
                         " more files (links, FIFOs, devices, hard links or "
                         "other owners' files; counted in jobtrail_shipper_files_refused_total)");
    said_now_ = unsaid_now_ = 0;
    if (over_limit_now_)
        events_.emit(Severity::kWarning, cfg_.name, event::kTooManyFiles,
                     "not reading " + std::to_string(over_limit_now_) + " more files: over the limit of " +
                         std::to_string(cfg_.max_files) + " files for this source or " +
                         std::to_string(cfg_.max_files_per_dir) + " in one directory");
    over_limit_now_ = 0;
    for (const auto& [uid, n] : owner_over_now_)
        events_.emit(Severity::kWarning, cfg_.name, event::kTooManyFiles,
                     "not reading " + std::to_string(n) + " more files of uid " + std::to_string(uid) +
                         ": over its share of " + std::to_string(cfg_.max_files_per_owner) +
                         " files per owner, kept for the others");
    owner_over_now_.clear();
}

bool FileSource::refuse(const std::string& path, const SafeFile& f, ino_t ino) {
    if (f.refused == Refusal::kMissing) return false;
    refused_now_[path] = {f.refused, ino};
    if (auto it = refused_.find(path); it != refused_.end() && it->second.why == f.refused) return false;
    { m_.files_refused.add({refusal_name(f.refused)}); }
    // Ten thousand files over a limit are one line per scan (say_refused), not ten thousand.
    if (f.refused == Refusal::kTooMany) {
        ++over_limit_now_;
        return true;
    }
    if (f.refused == Refusal::kOwnerShare) return true;  // said per owner, by say_refused
    if (++said_now_ > 10) {
        ++unsaid_now_;
        return true;
    }
    events_.emit(Severity::kWarning, cfg_.name, event::kFileRefused, "not reading " + f.error);
    return true;
}

bool FileSource::adopt(const std::string& path, const struct stat& st, bool seen, FileStream stream) {
    Tracked t;
    // The name may be a job user's: open it so that no link or FIFO they put there is followed,
    // and only if it is still the file the scan saw.
    SafeFile f = open_read_safe(path);
    if (f.refused == Refusal::kNone && (f.st.st_dev != st.st_dev || f.st.st_ino != st.st_ino)) return false;
    if (f.refused != Refusal::kNone) {
        refuse(path, f, st.st_ino);
        return false;
    }
    t.fd = std::move(f.fd);
    t.path = path;
    t.dev = st.st_dev;
    t.ino = st.st_ino;
    t.uid = f.st.st_uid;
    t.size = static_cast<uint64_t>(f.st.st_size);
    t.mtime = f.st.st_mtim;
    t.seen = seen;
    t.last_growth_ns = t.opened_ns = realtime_ns();
    t.cri = cri::Joiner(max_line_);
    const std::string key = key_of(st.st_dev, st.st_ino);
    if (auto s = saved_.find(key); s != saved_.end() && same_file(t.fd.get(), s->second.first)) {
        t.read_off = t.emitted_off = s->second.second;
        t.fingerprint = s->second.first;
        if (auto c = saved_cri_.find(key); c != saved_cri_.end()) t.cri.replay(c->second.first, c->second.second);
        saved_.erase(s);  // tracked now; ten thousand of them need not be held twice
        saved_cri_.erase(key);
    } else {
        // Now, not at the first read: the file may be closed before it is read, and is known
        // again by it when it is opened again.
        t.fingerprint = fingerprint(t.fd.get(), t.size);
    }
    label(t, std::move(stream));
    auto it = files_.emplace(key, std::move(t)).first;
    ++open_;
    // Ten thousand new files are each opened once to be checked, not held: past the cap they
    // wait, closed, for their turn.
    if (open_ > cfg_.max_open_files) close_file(it->second);
    return true;
}

}  // namespace jobtrail::shipper
