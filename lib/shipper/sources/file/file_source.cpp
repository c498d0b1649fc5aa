#include "shipper/sources/file/file_source.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/crc32.hpp"
#include "common/text.hpp"
#include "common/time.hpp"
#include "joblog/format.hpp"
#include "node/layout.hpp"
#include "node/nccl_file.hpp"

namespace jobtrail::shipper {
namespace {

constexpr size_t kFingerprintBytes = 256;

std::string fingerprint(int fd, uint64_t size) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(size, kFingerprintBytes));
    std::string buf(n, '\0');
    const ssize_t r = ::pread(fd, buf.data(), n, 0);
    buf.resize(r > 0 ? static_cast<size_t>(r) : 0);
    return std::to_string(buf.size()) + ":" + std::to_string(crc32(buf));
}

// A saved fingerprint of L bytes matches a file whose first L bytes hash the same.
bool same_file(int fd, const std::string& saved) {
    const size_t colon = saved.find(':');
    if (colon == std::string::npos) return false;
    const uint64_t len = std::strtoull(saved.c_str(), nullptr, 10);
    std::string buf(len, '\0');
    const ssize_t r = ::pread(fd, buf.data(), len, 0);
    if (r != static_cast<ssize_t>(len)) return false;
    return saved == std::to_string(len) + ":" + std::to_string(crc32(buf));
}

// "[2026-11-29T22:16:02.867605+0000] host:pid:tid ..." (the plugin's NCCL_DEBUG_TIMESTAMP_FORMAT)
// close: where the line's leading "[" closes (npos: it has none).
bool nccl_timestamp(Rfc3339Parser& stamps, std::string_view line, size_t close, int64_t& ts) {
    if (line.size() < 28 || line[0] != '[') return false;
    if (close > 40) return false;  // also when there is none (npos)
    const auto t = stamps.parse(line.substr(1, close - 1));
    if (!t) return false;
    ts = *t;
    return true;
}

// The line begins "host:pid:" after its stamp, as node::nccl_line_origin reads it back.
bool says_origin(std::string_view line, size_t close, std::string_view prefix) {
    size_t pos = 0;
    if (!line.empty() && line[0] == '[') {
        if (close > 64) return false;  // also when there is none (npos)
        pos = close + 1;
        if (pos < line.size() && line[pos] == ' ') ++pos;
    }
    return line.compare(pos, prefix.size(), prefix) == 0;
}

bool same_time(const struct timespec& a, const struct timespec& b) {
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

// A cleared line buffer keeps its capacity: give back a big one, or three hundred files that
// once held a long line would still cost their peak.
void release(std::string& s) {
    if (s.capacity() > 4096)
        std::string().swap(s);
    else
        s.clear();
}

std::string dir_of(const std::string& path) {
    return path.substr(0, path.rfind('/'));
}

}  // namespace

std::string FileSource::sanitize(std::string_view s) {
    std::string out;
    sanitize(s, out);
    return out;
}

void FileSource::sanitize(std::string_view s, std::string& out) {
    // Fast path, the common case: plain ASCII without NUL is taken as it is. A byte with its top
    // bit set, or zero, shows in the top bit of (b | (b - 1)): with SSE2, sixteen bytes at a time
    // checked as they are copied; eight at a time, then copied, otherwise.
#if defined(__SSE2__)
    if (s.size() >= 16) {
        out.resize(s.size());
        const __m128i one = _mm_set1_epi8(1);
        __m128i acc = _mm_setzero_si128();
        const auto take = [&](size_t at) {
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + at));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out.data() + at), v);
            acc = _mm_or_si128(acc, _mm_or_si128(v, _mm_sub_epi8(v, one)));
        };
        size_t i = 0;
        for (; i + 16 <= s.size(); i += 16) take(i);
        if (i < s.size()) take(s.size() - 16);  // the tail, overlapping what was seen
        if (_mm_movemask_epi8(acc) == 0) return;
    } else
#endif
    {
        constexpr uint64_t kLow = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
        uint64_t bad = 0;
        size_t i = 0;
        for (; i + 8 <= s.size(); i += 8) {
            uint64_t w;
            std::memcpy(&w, s.data() + i, 8);
            bad |= (w | (w - kLow)) & kHigh;
        }
        for (; i < s.size(); ++i) bad |= static_cast<unsigned char>(s[i]) - 1u >= 0x7fu;
        if (bad == 0) {
            out.assign(s);
            return;
        }
    }
    out.clear();
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c == 0) {
            out += "\\x00";
            ++i;
        } else if (c < 0x80) {
            out += static_cast<char>(c);
            ++i;
        } else {
            // Reuse escape_line's UTF-8 validation: a valid sequence comes back unchanged.
            size_t n = (c >= 0xf0) ? 4 : (c >= 0xe0) ? 3 : (c >= 0xc2) ? 2 : 1;
            const std::string_view seq = s.substr(i, std::min(n, s.size() - i));
            if (n > 1 && seq.size() == n && escape_line(seq) == seq) {
                out.append(seq);
                i += n;
            } else {
                out += "\xef\xbf\xbd";  // U+FFFD
                ++i;
            }
        }
    }
}

FileSource::FileSource(FileSourceConfig cfg, NodeInfo node, uint64_t max_line, Metrics& m, int64_t idle_ms,
                       Events events, int64_t scan_interval_ms, Labeler labeler)
    : cfg_(std::move(cfg)),
      node_(std::move(node)),
      max_line_(max_line),
      m_(m),
      idle_ns_(idle_ms * 1'000'000),
      scan_interval_ns_(scan_interval_ms * 1'000'000),
      events_(std::move(events)),
      labeler_(std::move(labeler)),
      inotify_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    idle_close_ns_ = cfg_.idle_close_ms * 1'000'000;
    format_ = cfg_.format == "joblog" ? Format::kJoblog
              : cfg_.format == "nccl" ? Format::kNccl
              : cfg_.format == "cri"  ? Format::kCri
                                      : Format::kRaw;
}

void FileSource::restore(const nlohmann::json& j) {
    if (!j.is_object() || !j.contains("files") || !j["files"].is_array()) return;
    for (const auto& f : j["files"]) {
        if (!f.is_object() || !f.contains("key") || !f.contains("fp") || !f.contains("offset")) continue;
        if (!f["key"].is_string() || !f["fp"].is_string() || !f["offset"].is_number_unsigned()) continue;
        saved_[f["key"].get<std::string>()] = {f["fp"].get<std::string>(), f["offset"].get<uint64_t>()};
        if (f.contains("path") && f["path"].is_string())
            saved_paths_[f["key"].get<std::string>()] = f["path"].get<std::string>();
        if (f.contains("cri_done") && f["cri_done"].is_number_unsigned() && f.contains("cri_held") &&
            f["cri_held"].is_array() && f["cri_held"].size() == 2 && f["cri_held"][0].is_number_integer() &&
            f["cri_held"][1].is_number_integer())
            saved_cri_[f["key"].get<std::string>()] = {
                f["cri_done"].get<uint64_t>(), {f["cri_held"][0].get<int64_t>(), f["cri_held"][1].get<int64_t>()}};
    }
}

bool FileSource::refuse(const std::string& path, const SafeFile& f, ino_t ino) {
    if (f.refused == Refusal::kMissing) return false;
    refused_now_[path] = {f.refused, ino};
    if (auto it = refused_.find(path); it != refused_.end() && it->second.why == f.refused) return false;
    {
        std::lock_guard<std::mutex> lk(m_.mu);
        ++m_.files_refused[refusal_name(f.refused)];
    }
    // Ten thousand files over a limit are one line per scan (below), not ten thousand.
    if (f.refused == Refusal::kTooMany) {
        ++over_limit_now_;
        return true;
    }
    if (f.refused == Refusal::kOwnerShare) return true;  // said per owner, by the scan
    if (++said_now_ > 10) {
        ++unsaid_now_;
        return true;
    }
    events_.emit(Severity::kWarning, cfg_.name, "file_refused", "not reading " + f.error);
    return true;
}

bool FileSource::adopt(const std::string& path, const struct stat& st, bool seen) {
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
    label(t);
    auto it = files_.emplace(key, std::move(t)).first;
    ++open_;
    // Ten thousand new files are each opened once to be checked, not held: past the cap they
    // wait, closed, for their turn.
    if (open_ > cfg_.max_open_files) close_file(it->second);
    return true;
}

void FileSource::label(Tracked& t) {
    const std::string& path = t.path;
    // Labels from the path, as the node contract names job logs and NCCL files.
    std::string job_id;
    Metadata md;
    std::optional<node::NcclFile> nccl;
    t.phase.clear();
    t.step.clear();
    loki::LabelSet labels = {{node::label::kCluster, node_.cluster},
                             {node::label::kNode, node_.node},
                             {node::label::kJob, cfg_.job},
                             {node::label::kServiceName, cfg_.job}};
    if (labeler_) {
        // Checked by the scan; a file found again under a rotated name keeps what its name gives.
        node::Stream kind = cfg_.stream;
        if (auto r = labeler_(path); r.ok) {
            for (auto& [k, v] : r.value.labels) labels[k] = std::move(v);
            md = std::move(r.value.metadata);
            job_id = std::move(r.value.job_id);
            kind = r.value.kind;
        }
        for (const auto& [k, v] : cfg_.labels) labels[k] = v;
        if (!job_id.empty()) labels[node::label::kJobId] = job_id;
        t.origin = make_origin(std::move(labels), std::move(md), kind, job_id);
        return;
    }
    if (const auto jl = node::parse_job_log(path)) {
        t.phase = std::string(node::phase_name(jl->phase));
        job_id = jl->job_id;
        md.emplace_back("phase", t.phase);
    } else if ((nccl = node::parse_nccl_file(path))) {
        job_id = nccl->job_id;
        t.step = nccl->step;
    }
    t.nccl_prefix.clear();
    t.file_name.clear();
    Metadata first;
    if (format_ == Format::kNccl) {
        // One stream per job and node: which file a line came from is metadata (the bundle
        // writes one file per file). The name is <step>.<host>.<pid>.log and NCCL's line prefix
        // says host:pid:tid: the step goes on the file's first line shipped (a process is one
        // step's, so its host:pid names the step from then on), and the name on a line that
        // does not say where it came from (Loki pays for every byte of every line).
        t.file_name = path.substr(path.rfind('/') + 1);
        if (nccl && node::plain_name_part(nccl->step) && node::plain_name_part(nccl->host)) {
            first.emplace_back("step", nccl->step);
            t.nccl_prefix = nccl->host + ":" + nccl->pid + ":";
        } else {
            md.emplace_back("file", t.file_name);
        }
    }
    for (const auto& [k, v] : cfg_.labels) labels[k] = v;
    if (!job_id.empty()) labels[node::label::kJobId] = job_id;
    t.origin = make_origin(std::move(labels), std::move(md), cfg_.stream, job_id, t.step, std::move(first));
}

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
    return files_.erase(it);
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
    if (!same_file(f.fd.get(), t.fingerprint) || (t.fingerprint.rfind("0:", 0) == 0 && t.read_off == 0))
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

void FileSource::find_renamed() {
    // A file we had not finished may have been renamed away (rotation) while we were down: it
    // no longer matches the globs, so look for its inode beside its old name and finish it.
    // One listing per directory, d_ino compared: ten thousand renamed files are not ten
    // thousand listings of their directory.
    std::map<std::string, std::map<ino_t, std::string>> by_dir;  // dir -> inode -> key
    for (const auto& [key, saved] : saved_) {
        const auto p = saved_paths_.find(key);
        if (files_.count(key) || p == saved_paths_.end()) continue;
        by_dir[dir_of(p->second)][static_cast<ino_t>(std::strtoull(key.c_str() + key.find(':') + 1, nullptr, 10))] =
            key;
    }
    std::vector<std::pair<std::string, struct stat>> found;
    for (const auto& [dir, want] : by_dir) {
        Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!dfd.valid()) continue;
        DIR* d = ::fdopendir(dfd.get());
        if (d == nullptr) continue;
        dfd.release();  // closedir closes it
        while (const dirent* e = ::readdir(d)) {
            const auto w = want.find(e->d_ino);
            if (w == want.end()) continue;
            struct stat st {};
            if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
                key_of(st.st_dev, st.st_ino) != w->second)
                continue;
            if (static_cast<uint64_t>(st.st_size) > saved_[w->second].second)
                found.emplace_back(dir + "/" + e->d_name, st);
        }
        ::closedir(d);
    }
    for (const auto& [path, st] : found) adopt(path, st, false);
}

void FileSource::update_watches() {
    if (!inotify_.valid()) return;
    std::set<std::string> dirs;
    for (const auto& [k, t] : files_) dirs.insert(dir_of(t.path));
    for (auto it = watched_.begin(); it != watched_.end();) {
        if (dirs.count(it->first)) {
            ++it;
            continue;
        }
        ::inotify_rm_watch(inotify_.get(), it->second);
        it = watched_.erase(it);
    }
    for (const auto& d : dirs) {
        if (watched_.count(d)) continue;
        // A user's directory: never followed through a link; failing (the watch limit) only
        // means its lines wait for the poll interval, as without a watch.
        const int wd = ::inotify_add_watch(inotify_.get(), d.c_str(), IN_MODIFY | IN_ONLYDIR | IN_DONT_FOLLOW);
        if (wd >= 0) watched_[d] = wd;
    }
}

void FileSource::woken() {
    // A few reads, not until empty: writers on many cores could keep it from ever being empty.
    // What is left keeps the descriptor readable for the next wait.
    alignas(struct inotify_event) char buf[4096];
    for (int i = 0; i < 4 && inotify_.valid() && ::read(inotify_.get(), buf, sizeof buf) > 0; ++i) {
    }
}

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
            events_.emit(Severity::kWarning, cfg_.name, "glob_failed",
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
        {
            for (size_t i = 0; i < g.gl_pathc; ++i) {
                const std::string path = g.gl_pathv[i];
                struct stat st {};
                // lstat: a symlink is refused (and counted) when adopted, never followed.
                if (::lstat(path.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) continue;
                if (auto r = refused_.find(path); r != refused_.end() && r->second.ino == st.st_ino &&
                                                  r->second.why != Refusal::kTooMany &&
                                                  r->second.why != Refusal::kOwnerShare) {
                    refused_now_.insert(*r);  // the same entry, refused before: not opened again
                    ++per_dir[path.substr(0, path.rfind('/'))];
                    continue;
                }
                if (!S_ISREG(st.st_mode)) {
                    // Counts against its directory's cap like a file: past it, not even opened.
                    size_t& in_dir = per_dir[path.substr(0, path.rfind('/'))];
                    if (in_dir >= cfg_.max_files_per_dir) {
                        SafeFile over;
                        over.refused = Refusal::kTooMany;
                        refuse(path, over, st.st_ino);
                    } else {
                        refuse(path, open_read_safe(path), st.st_ino);
                    }
                    ++in_dir;
                    continue;
                }
                const std::string key = key_of(st.st_dev, st.st_ino);
                auto it = files_.find(key);
                if (it != files_.end()) {
                    Tracked& t = it->second;
                    t.seen = true;
                    t.path = path;
                    // Closed: the scan's lstat says whether it changed. Opened again by poll,
                    // as descriptors allow.
                    if (!t.fd.valid() &&
                        (static_cast<uint64_t>(st.st_size) != t.size || !same_time(st.st_mtim, t.mtime))) {
                        t.stale = true;
                        t.size = static_cast<uint64_t>(st.st_size);
                        t.mtime = st.st_mtim;
                    }
                    continue;
                }
                if (labeler_) {
                    if (auto r = labeler_(path); !r.ok) {
                        SafeFile odd;
                        odd.refused = Refusal::kUnexpectedName;
                        odd.error = r.error;
                        refuse(path, odd, st.st_ino);
                        continue;
                    }
                }
                size_t& in_dir = per_dir[path.substr(0, path.rfind('/'))];
                // An owner past their share is refused for that first, so that the reason stays
                // the same from scan to scan (and is counted once) as the source fills.
                if (st.st_uid != 0 && per_owner[st.st_uid] >= cfg_.max_files_per_owner) {
                    SafeFile over;
                    over.refused = Refusal::kOwnerShare;
                    if (refuse(path, over, st.st_ino)) ++owner_over_now_[st.st_uid];
                    continue;
                }
                if (files_.size() >= cfg_.max_files || in_dir >= cfg_.max_files_per_dir) {
                    SafeFile over;
                    over.refused = Refusal::kTooMany;
                    over.error =
                        path + ": over the limit of " +
                        std::to_string(files_.size() >= cfg_.max_files ? cfg_.max_files : cfg_.max_files_per_dir) +
                        (files_.size() >= cfg_.max_files ? " files for this source" : " files in its directory");
                    refuse(path, over, st.st_ino);
                    continue;
                }
                if (adopt(path, st, true) && st.st_uid != 0) ++per_owner[st.st_uid];
                ++in_dir;
            }
        }
        globfree(&g);
    }
    update_watches();
    if (first_scan_) {
        first_scan_ = false;
        find_renamed();
        saved_paths_.clear();  // needed by find_renamed only
    }
    find_moved();
    refused_.swap(refused_now_);
    refused_now_.clear();
    if (unsaid_now_)
        events_.emit(Severity::kWarning, cfg_.name, "file_refused",
                     "not reading " + std::to_string(unsaid_now_) +
                         " more files (links, FIFOs, devices, hard links or "
                         "other owners' files; counted in jobtrail_shipper_files_refused_total)");
    said_now_ = unsaid_now_ = 0;
    if (over_limit_now_)
        events_.emit(Severity::kWarning, cfg_.name, "too_many_files",
                     "not reading " + std::to_string(over_limit_now_) + " more files: over the limit of " +
                         std::to_string(cfg_.max_files) + " files for this source or " +
                         std::to_string(cfg_.max_files_per_dir) + " in one directory");
    over_limit_now_ = 0;
    for (const auto& [uid, n] : owner_over_now_)
        events_.emit(Severity::kWarning, cfg_.name, "too_many_files",
                     "not reading " + std::to_string(n) + " more files of uid " + std::to_string(uid) +
                         ": over its share of " + std::to_string(cfg_.max_files_per_owner) +
                         " files per owner, kept for the others");
    owner_over_now_.clear();
}

void FileSource::find_moved() {
    // A closed file gone from the globs may have been renamed away after its last lines were
    // written (rotation): an open one is finished through its descriptor, a closed one is
    // looked for by inode beside its old name. One listing per directory, d_ino compared.
    std::map<std::string, std::map<ino_t, Tracked*>> by_dir;
    for (auto& [k, t] : files_)
        if (!t.seen && !t.fd.valid()) by_dir[dir_of(t.path)][t.ino] = &t;
    for (auto& [dir, want] : by_dir) {
        Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!dfd.valid()) continue;
        DIR* d = ::fdopendir(dfd.get());
        if (d == nullptr) continue;
        dfd.release();  // closedir closes it
        while (const dirent* e = ::readdir(d)) {
            auto w = want.find(e->d_ino);
            if (w == want.end()) continue;
            Tracked& t = *w->second;
            struct stat st {};
            if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
                st.st_dev != t.dev || st.st_ino != t.ino)
                continue;
            t.path = dir + "/" + e->d_name;
            if (static_cast<uint64_t>(st.st_size) != t.size || !same_time(st.st_mtim, t.mtime)) {
                t.stale = true;
                t.size = static_cast<uint64_t>(st.st_size);
                t.mtime = st.st_mtim;
            }
        }
        ::closedir(d);
    }
}

void FileSource::emit_line(Tracked& t, std::string_view raw, std::vector<Event>& out) {
    std::string_view text = raw;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (format_ == Format::kNccl || format_ == Format::kRaw) {
        // Every NCCL line: built in place, sanitized straight from the read buffer into a
        // recycled one.
        Event& e = out.emplace_back();
        e.origin = t.origin;
        if (format_ == Format::kNccl) {
            const size_t close = !text.empty() && text[0] == '[' ? text.find(']') : std::string_view::npos;
            nccl_timestamp(t.stamps, text, close, e.ts_ns);
            if (!t.nccl_prefix.empty() && !says_origin(text, close, t.nccl_prefix))
                e.metadata.emplace_back("file", t.file_name);
        }
        if (e.ts_ns == 0) e.ts_ns = realtime_ns();
        if (!spare_lines_.empty()) {
            e.line.swap(spare_lines_.back());
            spare_lines_.pop_back();
            spare_bytes_ -= std::min(spare_bytes_, e.line.capacity());
        }
        sanitize(text, e.line);
        cut_long(e.line);
        return;
    }
    Event e;
    e.origin = t.origin;
    std::string line;
    switch (format_) {
        case Format::kJoblog: {
            joblog::Line l;
            if (joblog::parse_line(text, l)) {
                e.ts_ns = l.ts_ns;
                line = (t.phase.empty() ? "" : t.phase + " ") + std::string(l.tag) +
                       (l.name.empty() ? "" : "[" + std::string(l.name) + "]") + " " + std::string(l.text);
                e.metadata.emplace_back("tag", std::string(l.tag));
            } else {
                line = std::string(text);
            }
            break;
        }
        case Format::kCri: {
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
        case Format::kNccl:
        case Format::kRaw:
            break;  // above
    }
    finish_line(std::move(e), std::move(line), out);
}

void FileSource::cut_long(std::string& line) {
    if (line.size() <= max_line_) return;
    const std::string_view keep = utf8_prefix(line, max_line_ - 64);
    line = std::string(keep) + " [jobtrail: line truncated, " + std::to_string(line.size() - keep.size()) +
           " bytes dropped]";
    m_.drop("truncated_lines_kept");
}

void FileSource::recycle(std::vector<Event>& done) {
    // Only the formats that take them back out (NCCL, plain); about one pass of lines, a long
    // line's buffer let go.
    if (format_ != Format::kNccl && format_ != Format::kRaw) return;
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
    e.ts_ns = j.ts_ns;
    e.metadata.emplace_back("stream", std::move(j.stream));
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
    e.line = sanitize(line);
    out.push_back(std::move(e));
}

void FileSource::take_partial(Tracked& t, std::vector<Event>& out) {
    emit_line(t, t.partial, out);
    t.emitted_off += t.partial.size();
    release(t.partial);
}

void FileSource::read_file(Tracked& t, std::vector<Event>& out, size_t& budget) {
    if (t.fd.valid()) {
        struct stat st {};
        if (::fstat(t.fd.get(), &st) != 0) return;
        t.size = static_cast<uint64_t>(st.st_size);
        if (t.size < t.read_off) {
            // copytruncate: the file started over. Its last line without end was read: ship it.
            if (!t.partial.empty()) take_partial(t, out);
            drain_cri(t, out);
            t.cri.clear();
            t.read_off = t.emitted_off = 0;
            t.fingerprint.clear();
        }
        if (t.fingerprint.empty() || (t.fingerprint.rfind("256:", 0) != 0 && t.size > 0))
            t.fingerprint = fingerprint(t.fd.get(), t.size);
        // What a line costs in the spool beyond its bytes: the stream and the file's metadata are
        // in every record. Charged per line, so a user's one-byte lines under a long file name
        // cannot turn a pass's budget into a hundred times as many spool bytes.
        size_t overhead = 32;
        if (t.origin) {
            overhead += t.origin->stream.size();
            for (const auto& [k, v] : t.origin->metadata) overhead += k.size() + v.size();
        }
        char buf[65536];
        bool spent = false;
        while (budget > 0 && !spent && t.read_off < t.size) {
            const ssize_t n =
                ::pread(t.fd.get(), buf, std::min<size_t>(sizeof buf, budget), static_cast<off_t>(t.read_off));
            if (n <= 0) break;
            t.read_off += static_cast<uint64_t>(n);
            t.last_growth_ns = realtime_ns();
            std::string_view data(buf, static_cast<size_t>(n));
            while (!data.empty()) {
                const size_t nl = data.find('\n');
                if (nl == std::string_view::npos) {
                    t.partial.append(data);
                    budget -= std::min(budget, data.size());
                    // A line without end that keeps growing: cut it at the cap rather than hold it forever.
                    if (t.partial.size() > max_line_ + 4096) take_partial(t, out);
                    break;
                }
                if (t.partial.empty()) {
                    emit_line(t, data.substr(0, nl), out);
                    t.emitted_off += nl + 1;
                } else {
                    t.partial.append(data.substr(0, nl));
                    take_partial(t, out);
                    t.emitted_off += 1;
                }
                data.remove_prefix(nl + 1);
                budget -= std::min(budget, nl + 1 + overhead);
                if (budget == 0 && !data.empty()) {
                    // The rest of the chunk is read again next pass, from the end of this line.
                    t.read_off = t.emitted_off;
                    spent = true;
                    break;
                }
            }
        }
    }
    // A last line without newline, at the end of the file and idle for a while: take it as it
    // is. A closed file is at its end unless it changed since.
    if (!t.partial.empty() && t.read_off >= t.size && !t.stale && realtime_ns() - t.last_growth_ns > idle_ns_)
        take_partial(t, out);
}

void FileSource::cut_partials(std::vector<Event>& out, uint64_t held) {
    // Longest first: fewest lines cut for the bytes given back. Each is shipped in pieces no
    // longer than a line may be, so none of it is lost; the rest of the line, when it comes,
    // is a line of its own.
    std::vector<Tracked*> v;
    for (auto& [k, t] : files_)
        if (!t.partial.empty() || t.cri.holding()) v.push_back(&t);
    auto held_by = [](const Tracked* t) { return t->partial.size() + t->cri.held_bytes(); };
    std::sort(v.begin(), v.end(), [&](const Tracked* a, const Tracked* b) { return held_by(a) > held_by(b); });
    auto pieces = [&](Tracked& t, std::string_view rest) {
        while (!rest.empty()) {
            std::string_view piece = utf8_prefix(rest, max_line_);
            if (piece.empty()) piece = rest.substr(0, max_line_);
            emit_line(t, piece, out);
            rest.remove_prefix(piece.size());
        }
    };
    for (Tracked* t : v) {
        if (held <= cfg_.max_partial_bytes) break;
        const size_t n = held_by(t);
        if (!t->partial.empty()) {
            pieces(*t, t->partial);
            t->emitted_off += t->partial.size();
            release(t->partial);
        }
        // CRI pieces waiting for their F: shipped as they are (each at most a line long).
        drain_cri(*t, out);
        held -= std::min<uint64_t>(held, n);
        ++cut_unsaid_;
        cut_bytes_unsaid_ += n;
        ++m_.partial_lines_cut;
    }
}

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
                        t.fd = std::move(f.fd);
                        ++open_;
                        t.uid = f.st.st_uid;
                        t.read_off = t.emitted_off = 0;
                        t.fingerprint = fingerprint(t.fd.get(), static_cast<uint64_t>(f.st.st_size));
                        t.stale = false;
                        t.opened_ns = realtime_ns();
                        label(t);
                        break;
                    case Reopen::kRefused:
                        // Hard-linked or given away since: not read, but its position kept in case
                        // it comes back as it was.
                        refuse(t.path, f, t.ino);
                        saved_[it->first] = {t.fingerprint, t.emitted_off};
                        it = forget(it);
                        continue;
                }
            }
            read_file(t, out, budget);
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
            held += t.partial.size() + t.cri.held_bytes();
            ++it;
        }
    if (held > cfg_.max_partial_bytes) cut_partials(out, held);
    if (cut_unsaid_ && (cut_said_ns_ == 0 || monotonic_ns() - cut_said_ns_ >= 10'000'000'000)) {
        cut_said_ns_ = monotonic_ns();
        events_.emit(Severity::kWarning, cfg_.name, "partial_lines_cut",
                     "shipped " + std::to_string(cut_unsaid_) + " unterminated lines (" +
                         std::to_string(cut_bytes_unsaid_) + " bytes) before their end: its files held more than " +
                         std::to_string(cfg_.max_partial_bytes) +
                         " bytes of lines without newline (max_partial_bytes); the rest of each follows as a new line");
        cut_unsaid_ = cut_bytes_unsaid_ = 0;
    }
    // Files waiting for a descriptor: another pass soon, not after the idle sleep.
    return budget == 0 || waiting > 0;
}

void FileSource::flush_partial(std::vector<Event>& out) {
    for (auto& [k, t] : files_) {
        struct stat st {};
        // Only a real last line: at the end of the file, not the cut of a bounded read.
        if (t.partial.empty()) continue;
        if (t.fd.valid() ? ::fstat(t.fd.get(), &st) != 0 || t.read_off < static_cast<uint64_t>(st.st_size) : t.stale)
            continue;
        take_partial(t, out);
    }
}

nlohmann::json FileSource::checkpoint() const {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& [k, t] : files_) {
        if (!t.cri.holding()) {
            files.push_back({{"key", k}, {"path", t.path}, {"fp", t.fingerprint}, {"offset", t.emitted_off}});
            continue;
        }
        // P pieces only held here are read again at the next start, and joined again.
        const auto held = t.cri.held_starts();
        files.push_back({{"key", k},
                         {"path", t.path},
                         {"fp", t.fingerprint},
                         {"offset", t.cri.resume_offset(t.emitted_off)},
                         {"cri_done", t.emitted_off},
                         {"cri_held", {held[0], held[1]}}});
    }
    return {{"files", files}};
}

void FileKind::build(const SourceContext& c, const Config& files, Sources& out) {
    for (const auto& f : files)
        out.push_back(
            std::make_unique<FileSource>(f, c.node, c.cfg.shipper.max_line_bytes, c.metrics, 2000, c.events, 1000));
}

}  // namespace jobtrail::shipper
