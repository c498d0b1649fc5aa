#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <set>
#include <utility>

#include "common/time.hpp"
#include "shipper/sources/file/file_source.hpp"
#include "shipper/sources/file/fingerprint.hpp"

namespace jobtrail::shipper {

// What one scan knows as it walks the directories: the files counted against each directory's
// and owner's limit so far, and which directories it could not list in full.
struct FileSource::ScanPass {
    std::map<std::string, size_t> per_dir;
    std::map<uid_t, size_t> per_owner;
    std::map<std::string, std::vector<Tracked*>> tracked_in;  // directory -> its tracked files
    std::set<std::string> kept;    // not listed (unreadable, a mount): what is tracked there stays
    std::set<std::string> walked;  // listed, or unchanged since
    std::set<std::string> listed;  // listed to its end
    std::set<std::string> keys;    // dev:ino of each entry the listing found
    bool limited = false;          // the listing refused a file for the source's or an owner's limit
    size_t adopted = 0;            // files the listing adopted
};

namespace {

bool has_magic(const std::string& s) {
    return s.find_first_of("*?[") != std::string::npos;
}

// glob's GLOB_BRACE: "a/{b,c}/d" is "a/b/d" and "a/c/d".
std::vector<std::string> expand_braces(const std::string& p) {
    const size_t open = p.find('{');
    if (open == std::string::npos) return {p};
    std::vector<std::string> parts;
    size_t depth = 0, from = open + 1;
    for (size_t i = open + 1; i < p.size(); ++i) {
        if (p[i] == '{') ++depth;
        if (p[i] == '}' && depth-- == 0) {
            parts.push_back(p.substr(from, i - from));
            std::vector<std::string> out;
            for (const auto& part : parts)
                for (auto& e : expand_braces(p.substr(0, open) + part + p.substr(i + 1))) out.push_back(std::move(e));
            return out;
        }
        if (p[i] == ',' && depth == 0) {
            parts.push_back(p.substr(from, i - from));
            from = i + 1;
        }
    }
    return {p};  // no closing brace: taken as it is, as glob does
}

std::vector<std::string> components(const std::string& p) {
    std::vector<std::string> out;
    for (size_t at = 0; at < p.size();) {
        const size_t slash = std::min(p.find('/', at), p.size());
        if (slash > at) out.push_back(p.substr(at, slash - at));
        at = slash + 1;
    }
    return out;
}

std::string join(const std::string& dir, const std::string& name) {
    return dir == "/" ? "/" + name : dir + "/" + name;
}

// As glob matches: a leading dot only by a pattern that says it.
bool matches(const std::string& pattern, const char* name) {
    return ::fnmatch(pattern.c_str(), name, FNM_PERIOD) == 0;
}

// Each entry of the directory open at dfd, until each says stop; errno when it could not be read.
int list(int dfd, const std::function<bool(const dirent&)>& each) {
    const int fd = ::openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno;
    DIR* d = ::fdopendir(fd);
    if (d == nullptr) {
        const int e = errno;
        ::close(fd);
        return e;
    }
    int err = 0;
    for (;;) {
        errno = 0;
        const dirent* e = ::readdir(d);
        if (e == nullptr) {
            err = errno;
            break;
        }
        if (std::string_view(e->d_name) == "." || std::string_view(e->d_name) == "..") continue;
        if (!each(*e)) break;
    }
    ::closedir(d);
    return err;
}

// A directory below dfd, never across a mount (EXDEV: one made since the mount table was read is
// not entered, so a FUSE daemon that never answers is never asked) nor a link. Kernels before
// 5.6 lack openat2: opened as before, the st_dev check after it still refusing the mount.
int open_dir_below(int dfd, const std::string& name) {
    struct open_how how {};
    how.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
    how.resolve = RESOLVE_NO_XDEV | RESOLVE_NO_SYMLINKS;
    const long fd = ::syscall(SYS_openat2, dfd, name.c_str(), &how, sizeof how);
    if (fd >= 0 || errno != ENOSYS) return static_cast<int>(fd);
    return ::openat(dfd, name.c_str(), static_cast<int>(how.flags));
}

int64_t ns_of(const struct timespec& t) {
    return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

}  // namespace

void FileSource::scan() {
    // Directory by directory, never one glob over all of them: a directory that cannot be listed
    // (a user's FUSE mount answers root with EACCES) is skipped alone, and what is tracked in it
    // is kept rather than forgotten and read again from 0 once it can be listed.
    mounts_.refresh();
    ScanPass p;
    for (auto& [k, t] : files_) {
        t.seen = false;
        p.tracked_in[dir_of(t.path)].push_back(&t);
        ++p.per_dir[dir_of(t.path)];
        if (t.uid != 0) ++p.per_owner[t.uid];
    }
    for (auto& [k, r] : released_) r.seen = false;
    for (const auto& pattern : cfg_.paths)
        for (const auto& one : expand_braces(pattern)) walk_pattern(p, one);
    auto kept = [&](std::string d) {  // the directory or one above it
        for (;;) {
            if (p.kept.count(d)) return true;
            const size_t slash = d.rfind('/');
            if (slash == std::string::npos) return false;
            if (slash == 0) return p.kept.count("/") != 0;
            d.resize(slash);
        }
    };
    for (auto& [k, t] : files_)
        if (!t.seen && kept(dir_of(t.path))) t.seen = true;
    // A released file not seen where its directory was listed to its end is gone.
    for (auto it = released_.begin(); it != released_.end();) {
        const std::string d = dir_of(it->second.path);
        if (!it->second.seen && !kept(d) && (p.listed.count(d) || !p.walked.count(d)))
            it = released_.erase(it);
        else
            ++it;
    }
    std::set<std::string> dirs;
    for (const auto& [k, t] : files_) dirs.insert(dir_of(t.path));
    watch_.update(dirs);
    if (first_scan_) {
        first_scan_ = false;
        find_renamed();
    }
    find_moved();
    // A position kept for a file not tracked (refused since, or not adopted yet) goes with the
    // file, by the rule released files go by: kept while it may still be there, so that a new
    // file given its inode that begins alike is not read from the old position.
    for (auto it = saved_.begin(); it != saved_.end();) {
        const auto at = saved_paths_.find(it->first);
        const std::string d = at == saved_paths_.end() ? std::string() : dir_of(at->second);
        if (!p.keys.count(it->first) && !files_.count(it->first) && !kept(d) &&
            (p.listed.count(d) || !p.walked.count(d))) {
            saved_cri_.erase(it->first);
            saved_paths_.erase(it->first);
            it = saved_.erase(it);
        } else {
            ++it;
        }
    }
    // A run's count is taken when its file's next line is read: one of a file neither tracked nor
    // kept goes too.
    for (auto it = saved_runs_.begin(); it != saved_runs_.end();)
        it = files_.count(it->first) || saved_.count(it->first) ? std::next(it) : saved_runs_.erase(it);
    refused_.swap(refused_now_);
    refused_now_.clear();
    dirs_.swap(dirs_now_);
    dirs_now_.clear();
    dir_refused_.swap(dir_refused_now_);
    dir_refused_now_.clear();
    say_refused();
}

void FileSource::walk_pattern(ScanPass& p, const std::string& pattern) {
    const auto comps = components(pattern);
    if (comps.empty()) return;
    // The part before the first wildcard is the site's own path: opened as configured.
    size_t first = 0;
    while (first + 1 < comps.size() && !has_magic(comps[first])) ++first;
    std::string dir = pattern[0] == '/' ? "/" : ".";
    for (size_t i = 0; i < first; ++i) dir = join(dir, comps[i]);
    mounts_.root(dir);
    Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    struct stat st {};
    if (!d.valid() || ::fstat(d.get(), &st) != 0) {
        if (errno != ENOENT && errno != ENOTDIR) unlistable(p, dir, errno);
        return;
    }
    walk(p, d.get(), dir, st.st_dev, comps, first);
}

void FileSource::walk(ScanPass& p, int dfd, const std::string& dir, dev_t dev, const std::vector<std::string>& comps,
                      size_t i) {
    const std::string& c = comps[i];
    if (i + 1 == comps.size()) {
        if (has_magic(c)) {
            list_files(p, dfd, dir, dev, c);
        } else if (const std::string path = join(dir, c); mounts_.contains(path)) {
            refuse_dir(p, path, "a mount point", "mount_point", true);
        } else if (struct stat st{}; ::fstatat(dfd, c.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
            scan_path(p, path, st);
        }
        return;
    }
    if (!has_magic(c)) {
        enter(p, dfd, dir, dev, c, comps, i + 1);
        return;
    }
    std::vector<std::string> subs;
    const int err = list(dfd, [&](const dirent& e) {
        if (e.d_type != DT_REG && matches(c, e.d_name)) subs.emplace_back(e.d_name);  // a link is refused there
        return true;
    });
    if (err != 0) {
        unlistable(p, dir, err);
        return;
    }
    // In order: under the source's cap the same job directories win after a restart.
    std::sort(subs.begin(), subs.end());
    for (const auto& s : subs) enter(p, dfd, dir, dev, s, comps, i + 1);
}

void FileSource::enter(ScanPass& p, int dfd, const std::string& dir, dev_t dev, const std::string& name,
                       const std::vector<std::string>& comps, size_t i) {
    const std::string path = join(dir, name);
    // Not even a stat into a mount below the site's path: a user's FUSE daemon may never answer.
    if (mounts_.contains(path)) {
        refuse_dir(p, path, "a mount point", "mount_point", true);
        return;
    }
    Fd sub(open_dir_below(dfd, name));
    if (!sub.valid()) {
        const int err = errno;
        struct stat st {};
        if (err == EXDEV)
            refuse_dir(p, path, "a mount point", "mount_point", true);
        else if ((err == ELOOP || err == ENOTDIR) && ::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                 S_ISLNK(st.st_mode))
            refuse_dir(p, path, "a symlink to a directory", "symlink", false);
        else if (err != ENOENT && err != ENOTDIR)
            unlistable(p, path, err);
        return;
    }
    struct stat st {};
    if (::fstat(sub.get(), &st) != 0) {
        unlistable(p, path, errno);
        return;
    }
    // Mounted since the mount table was read.
    if (st.st_dev != dev) {
        refuse_dir(p, path, "another filesystem mounted there", "mount_point", true);
        return;
    }
    walk(p, sub.get(), path, dev, comps, i);
}

void FileSource::list_files(ScanPass& p, int dfd, const std::string& dir, dev_t dev, const std::string& pattern) {
    struct stat ds {};
    if (::fstat(dfd, &ds) != 0) {
        unlistable(p, dir, errno);
        return;
    }
    auto& tracked = p.tracked_in[dir];
    p.walked.insert(dir);
    // Unchanged since the last listing (its mtime and ctime; the files tracked in it; no file waiting for
    // a slot freed since): the same entries, not read again. Its tracked files are looked at by
    // name, the closed ones for a change.
    if (auto c = dirs_.find(dir); c != dirs_.end() && c->second.dev == ds.st_dev && c->second.ino == ds.st_ino &&
                                  same_time(c->second.mtime, ds.st_mtim) && same_time(c->second.ctime, ds.st_ctim) &&
                                  c->second.tracked == tracked.size() &&
                                  (!c->second.limited || c->second.freed == freed_)) {
        dirs_now_.insert(*c);
        for (auto r = refused_.lower_bound(dir + "/"); r != refused_.end() && r->first.rfind(dir + "/", 0) == 0; ++r)
            if (r->first.find('/', dir.size() + 1) == std::string::npos) refused_now_.insert(*r);
        if (auto r = dir_refused_.find(dir); r != dir_refused_.end()) dir_refused_now_.insert(*r);
        for (Tracked* t : tracked) {
            if (t->fd.valid())
                t->seen = true;
            else
                look_again(dfd, *t);
        }
        return;
    }
    const int64_t started = realtime_ns();
    size_t& in_dir = p.per_dir[dir];
    p.limited = false;
    p.adopted = 0;
    bool full = false;
    const int err = list(dfd, [&](const dirent& e) {
        if (e.d_type == DT_DIR || !matches(pattern, e.d_name)) return true;
        const std::string key = key_of(dev, e.d_ino);
        const std::string path = join(dir, e.d_name);
        if (auto it = files_.find(key); it != files_.end() && it->second.fd.valid()) {
            it->second.seen = true;  // open: poll reads it through its descriptor
            it->second.path = path;
            return true;
        }
        const auto r = refused_.find(path);
        const bool known = files_.count(key) || released_.count(key) ||
                           (r != refused_.end() && r->second.ino == e.d_ino && r->second.why != Refusal::kTooMany &&
                            r->second.why != Refusal::kOwnerShare);
        // The cap applies while listing: a user's hundred thousand files are not read past it.
        if (!known && in_dir >= cfg_.max_files_per_dir) {
            full = true;
            return false;
        }
        if (mounts_.contains(path)) {
            refuse_dir(p, path, "a mount point", "mount_point", true);
            return true;
        }
        if (struct stat st{}; ::fstatat(dfd, e.d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) scan_path(p, path, st);
        return true;
    });
    if (err != 0) {
        unlistable(p, dir, err);
        return;
    }
    for (Tracked* t : tracked)
        if (!t->seen && full) look_again(dfd, *t);  // past where the listing stopped
    if (full) {
        dir_refused_now_[dir] = "too_many_files_in_directory";
        if (!dir_refused_.count(dir)) {
            m_.files_refused.add({"too_many_files_in_directory"});
            events_.emit(Severity::kWarning, cfg_.name, event::kTooManyFiles,
                         "not reading more files of " + dir + ": over the limit of " +
                             std::to_string(cfg_.max_files_per_dir) +
                             " files in one directory (max_files_per_dir); the rest of it is not listed");
        }
    } else {
        p.listed.insert(dir);
    }
    // Listed within a second of its last change: a change in the same tick of a coarse clock
    // would not show in its times, so list it again next time. By its ctime: its owner sets
    // the mtime as they like.
    if (started - ns_of(ds.st_ctim) > 1'000'000'000)
        dirs_now_[dir] = {ds.st_dev,         ds.st_ino, ds.st_mtim, ds.st_ctim, tracked.size() + p.adopted,
                          p.limited || full, freed_};
}

void FileSource::look_again(int dfd, Tracked& t) {
    const std::string name = t.path.substr(t.path.rfind('/') + 1);
    struct stat st {};
    if (mounts_.contains(t.path) || ::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_dev != t.dev ||
        st.st_ino != t.ino)
        return;
    t.seen = true;
    if (!t.fd.valid() && (static_cast<uint64_t>(st.st_size) != t.size || !same_time(st.st_mtim, t.mtime))) {
        t.stale = true;
        t.size = static_cast<uint64_t>(st.st_size);
        t.mtime = st.st_mtim;
    }
}

void FileSource::unlistable(ScanPass& p, const std::string& dir, int err) {
    p.kept.insert(dir);
    dir_refused_now_[dir] = "unlistable";
    if (dir_refused_.count(dir)) return;  // said when it began; tried again at every scan
    events_.emit(Severity::kWarning, cfg_.name, event::kGlobFailed,
                 "cannot list " + dir + ": " + errno_text(err) +
                     "; skipped alone and tried again at each scan (the files tracked in it are kept)");
}

void FileSource::refuse_dir(ScanPass& p, const std::string& path, const std::string& why, const char* reason,
                            bool keep) {
    if (keep) p.kept.insert(path);
    dir_refused_now_[path] = reason;
    if (auto r = dir_refused_.find(path); r != dir_refused_.end() && r->second == reason) return;
    m_.files_refused.add({reason});
    if (++said_now_ > 10) {
        ++unsaid_now_;
        return;
    }
    events_.emit(Severity::kWarning, cfg_.name, event::kFileRefused, "not reading " + path + ": " + why);
}

void FileSource::scan_path(ScanPass& p, const std::string& path, const struct stat& st) {
    if (S_ISDIR(st.st_mode)) return;
    p.keys.insert(key_of(st.st_dev, st.st_ino));
    size_t& in_dir = p.per_dir[dir_of(path)];
    if (auto r = refused_.find(path); r != refused_.end() && r->second.ino == st.st_ino &&
                                      r->second.why != Refusal::kTooMany && r->second.why != Refusal::kOwnerShare) {
        refused_now_.insert(*r);  // the same entry, refused before: not opened again
        ++in_dir;
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        refuse(path, open_read_safe(path), st.st_ino);  // counts against its directory's cap like a file
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
    if (auto r = released_.find(key); r != released_.end()) {
        r->second.seen = true;
        r->second.path = path;
        r->second.uid = st.st_uid;
        if (static_cast<uint64_t>(st.st_size) == r->second.size && same_time(st.st_mtim, r->second.mtime)) return;
        // Changed since it was released: tracked again from its checkpoint (adopt checks that it
        // is still the same file by its fingerprint).
        saved_[key] = {r->second.fingerprint, r->second.offset};
        saved_paths_[key] = path;
        released_.erase(r);
    }
    auto stream = labeler_(path);
    if (!stream.ok) {
        SafeFile odd;
        odd.refused = Refusal::kUnexpectedName;
        odd.error = stream.error;
        refuse(path, odd, st.st_ino);
        ++in_dir;
        return;
    }
    // An owner past their share is refused for that first, so that the reason stays
    // the same from scan to scan (and is counted once) as the source fills.
    if (st.st_uid != 0 && p.per_owner[st.st_uid] >= cfg_.max_files_per_owner) {
        SafeFile over;
        over.refused = Refusal::kOwnerShare;
        if (refuse(path, over, st.st_ino)) ++owner_over_now_[st.st_uid];
        p.limited = true;
        ++in_dir;
        return;
    }
    if (files_.size() >= cfg_.max_files) {
        SafeFile over;
        over.refused = Refusal::kTooMany;
        over.error = path + ": over the limit of " + std::to_string(cfg_.max_files) + " files for this source";
        refuse(path, over, st.st_ino);
        p.limited = true;
        ++in_dir;
        return;
    }
    if (adopt(path, st, true, std::move(stream.value))) {
        if (st.st_uid != 0) ++p.per_owner[st.st_uid];
        ++p.adopted;
    }
    ++in_dir;
}

// What this scan refused beyond the ten it said one by one, in a line per reason.
void FileSource::say_refused() {
    if (unsaid_now_)
        events_.emit(Severity::kWarning, cfg_.name, event::kFileRefused,
                     "not reading " + std::to_string(unsaid_now_) +
                         " more files (links, FIFOs, devices, hard links, mount points or "
                         "other owners' files; counted in jobtrail_shipper_files_refused_total)");
    said_now_ = unsaid_now_ = 0;
    if (over_limit_now_)
        events_.emit(Severity::kWarning, cfg_.name, event::kTooManyFiles,
                     "not reading " + std::to_string(over_limit_now_) + " more files: over the limit of " +
                         std::to_string(cfg_.max_files) + " files for this source");
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
    } else {
        // Now, not at the first read: the file may be closed before it is read, and is known
        // again by it when it is opened again.
        t.fingerprint = fingerprint(t.fd.get(), t.size);
    }
    // Tracked now (from its position, or as a new file): ten thousand of them need not be held twice.
    saved_.erase(key);
    saved_cri_.erase(key);
    saved_paths_.erase(key);
    label(t, std::move(stream));
    auto it = files_.emplace(key, std::move(t)).first;
    ++open_;
    // Ten thousand new files are each opened once to be checked, not held: past the cap they
    // wait, closed, for their turn.
    if (open_ > cfg_.max_open_files) close_file(it->second);
    return true;
}

}  // namespace jobtrail::shipper
