#include "shipper/sources/file_source.hpp"

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

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
bool nccl_timestamp(std::string_view line, int64_t& ts) {
    if (line.size() < 28 || line[0] != '[') return false;
    const size_t close = line.find(']');
    if (close > 40) return false;  // also when there is none (npos)
    const auto t = parse_rfc3339_ns(line.substr(1, close - 1));
    if (!t) return false;
    ts = *t;
    return true;
}

}  // namespace

std::string FileSource::sanitize(std::string_view s) {
    // Fast path, the common case: plain ASCII without NUL is taken as it is. Eight bytes at a
    // time: any byte with its top bit set, or zero, shows in the mask.
    constexpr uint64_t kLow = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
    uint64_t bad = 0;
    size_t i0 = 0;
    for (; i0 + 8 <= s.size(); i0 += 8) {
        uint64_t w;
        std::memcpy(&w, s.data() + i0, 8);
        bad |= (w | ((w - kLow) & ~w)) & kHigh;
    }
    for (; i0 < s.size(); ++i0) bad |= static_cast<unsigned char>(s[i0]) - 1u >= 0x7fu;
    if (bad == 0) return std::string(s);
    std::string out;
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
    return out;
}

FileSource::FileSource(config::FileSourceConfig cfg, NodeInfo node, uint64_t max_line, Metrics& m, int64_t idle_ms,
                       Events events, int64_t scan_interval_ms)
    : cfg_(std::move(cfg)),
      node_(std::move(node)),
      max_line_(max_line),
      m_(m),
      idle_ns_(idle_ms * 1'000'000),
      scan_interval_ns_(scan_interval_ms * 1'000'000),
      events_(std::move(events)) {
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
    }
}

void FileSource::refuse(const std::string& path, const SafeFile& f, ino_t ino) {
    if (f.refused == Refusal::kMissing) return;
    refused_now_[path] = {f.refused, ino};
    if (auto it = refused_.find(path); it != refused_.end() && it->second.why == f.refused) return;
    {
        std::lock_guard<std::mutex> lk(m_.mu);
        ++m_.files_refused[refusal_name(f.refused)];
    }
    // Ten thousand files over a limit are one line per scan (below), not ten thousand.
    if (f.refused == Refusal::kTooMany) {
        ++over_limit_now_;
        return;
    }
    if (++said_now_ > 10) {
        ++unsaid_now_;
        return;
    }
    events_.emit(Severity::kWarning, cfg_.name, "file_refused", "not reading " + f.error);
}

void FileSource::adopt(const std::string& path, const struct stat& st, bool seen) {
    Tracked t;
    // The name may be a job user's: open it so that no link or FIFO they put there is followed,
    // and only if it is still the file the scan saw.
    SafeFile f = open_read_safe(path);
    if (f.refused == Refusal::kNone && (f.st.st_dev != st.st_dev || f.st.st_ino != st.st_ino)) return;
    if (f.refused != Refusal::kNone) return refuse(path, f, st.st_ino);
    t.fd = std::move(f.fd);
    t.path = path;
    t.dev = st.st_dev;
    t.ino = st.st_ino;
    t.seen = seen;
    t.last_growth_ns = realtime_ns();
    const std::string key = key_of(st.st_dev, st.st_ino);
    if (auto s = saved_.find(key); s != saved_.end() && same_file(t.fd.get(), s->second.first)) {
        t.read_off = t.emitted_off = s->second.second;
        t.fingerprint = s->second.first;
    }
    // Labels from the path, as the node contract names job logs and NCCL files.
    std::string job_id;
    Metadata md;
    std::optional<node::NcclFile> nccl;
    if (const auto jl = node::parse_job_log(path)) {
        t.phase = std::string(node::phase_name(jl->phase));
        job_id = jl->job_id;
        md.emplace_back("phase", t.phase);
    } else if ((nccl = node::parse_nccl_file(path))) {
        job_id = nccl->job_id;
        t.step = nccl->step;
    }
    if (format_ == Format::kNccl) {
        // One stream per job and node: which file, step and rank a line came from is metadata.
        md.emplace_back("file", path.substr(path.rfind('/') + 1));
        if (nccl) {
            md.emplace_back("step", nccl->step);
            md.emplace_back("pid", nccl->pid);
        }
    }
    loki::LabelSet labels = {{node::label::kCluster, node_.cluster},
                             {node::label::kNode, node_.node},
                             {node::label::kJob, cfg_.job},
                             {node::label::kServiceName, cfg_.job}};
    for (const auto& [k, v] : cfg_.labels) labels[k] = v;
    if (!job_id.empty()) labels[node::label::kJobId] = job_id;
    t.origin = make_origin(std::move(labels), std::move(md), cfg_.stream, job_id, t.step);
    files_.emplace(key, std::move(t));
}

void FileSource::find_renamed() {
    // A file we had not finished may have been renamed away (rotation) while we were down: it
    // no longer matches the globs, so look for its inode beside its old name and finish it.
    for (const auto& [key, saved] : saved_) {
        if (files_.count(key) || saved_paths_.count(key) == 0) continue;
        const std::string& old = saved_paths_[key];
        const std::string dir = old.substr(0, old.rfind('/'));
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
            struct stat st {};
            if (::lstat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || key_of(st.st_dev, st.st_ino) != key)
                continue;
            if (static_cast<uint64_t>(st.st_size) > saved.second) adopt(e.path().string(), st, false);
            break;
        }
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
    for (const auto& [k, t] : files_) ++per_dir[t.path.substr(0, t.path.rfind('/'))];
    for (auto& g : found) {
        {
            for (size_t i = 0; i < g.gl_pathc; ++i) {
                const std::string path = g.gl_pathv[i];
                struct stat st {};
                // lstat: a symlink is refused (and counted) when adopted, never followed.
                if (::lstat(path.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) continue;
                if (auto r = refused_.find(path);
                    r != refused_.end() && r->second.ino == st.st_ino && r->second.why != Refusal::kTooMany) {
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
                    it->second.seen = true;
                    it->second.path = path;
                    continue;
                }
                size_t& in_dir = per_dir[path.substr(0, path.rfind('/'))];
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
                adopt(path, st, true);
                ++in_dir;
            }
        }
        globfree(&g);
    }
    if (first_scan_) {
        first_scan_ = false;
        find_renamed();
    }
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
}

void FileSource::emit_line(Tracked& t, std::string_view raw, std::vector<Event>& out) {
    Event e;
    e.ts_ns = 0;
    e.origin = t.origin;
    std::string_view text = raw;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
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
        case Format::kNccl:
            nccl_timestamp(text, e.ts_ns);
            line = sanitize(text);
            break;
        case Format::kCri: {
            // <RFC3339Nano> <stream> <P|F> <log>; a P(artial) line continues in the next one.
            const size_t a = text.find(' ');
            const size_t b = a == std::string_view::npos ? a : text.find(' ', a + 1);
            const size_t c = b == std::string_view::npos ? b : text.find(' ', b + 1);
            const auto ts = c == std::string_view::npos ? std::nullopt : parse_rfc3339_ns(text.substr(0, a));
            const std::string_view flag = ts ? text.substr(b + 1, c - b - 1) : std::string_view();
            if (!ts || (flag != "P" && flag != "F")) {
                line = std::string(text);  // not a CRI line: kept as it is
                break;
            }
            e.ts_ns = *ts;
            t.cri_partial += std::string(text.substr(c + 1));
            if (flag == "P" && t.cri_partial.size() <= max_line_) return;
            line = std::move(t.cri_partial);
            t.cri_partial.clear();
            e.metadata.emplace_back("stream", std::string(text.substr(a + 1, b - a - 1)));
            break;
        }
        case Format::kRaw:
            line = sanitize(text);
            break;
    }
    if (e.ts_ns == 0) e.ts_ns = realtime_ns();
    if (line.size() > max_line_) {
        const std::string_view keep = utf8_prefix(line, max_line_ - 64);
        line = std::string(keep) + " [jobtrail: line truncated, " + std::to_string(line.size() - keep.size()) +
               " bytes dropped]";
        m_.drop("truncated_lines_kept");
    }
    // NCCL and raw lines were sanitized above, straight from the read buffer; the rest now.
    e.line = (format_ == Format::kNccl || format_ == Format::kRaw) ? std::move(line) : sanitize(line);
    out.push_back(std::move(e));
}

void FileSource::read_file(Tracked& t, std::vector<Event>& out, size_t& budget) {
    struct stat st {};
    if (::fstat(t.fd.get(), &st) != 0) return;
    const auto size = static_cast<uint64_t>(st.st_size);
    if (size < t.read_off) {
        // copytruncate: the file started over.
        t.read_off = t.emitted_off = 0;
        t.partial.clear();
        t.fingerprint.clear();
    }
    if (t.fingerprint.empty() || (t.fingerprint.rfind("256:", 0) != 0 && size > 0))
        t.fingerprint = fingerprint(t.fd.get(), size);
    char buf[65536];
    while (budget > 0 && t.read_off < size) {
        const ssize_t n =
            ::pread(t.fd.get(), buf, std::min<size_t>(sizeof buf, budget), static_cast<off_t>(t.read_off));
        if (n <= 0) break;
        t.read_off += static_cast<uint64_t>(n);
        budget -= std::min<size_t>(budget, static_cast<size_t>(n));
        t.last_growth_ns = realtime_ns();
        std::string_view data(buf, static_cast<size_t>(n));
        while (!data.empty()) {
            const size_t nl = data.find('\n');
            if (nl == std::string_view::npos) {
                t.partial.append(data);
                // A line without end that keeps growing: cut it at the cap rather than hold it forever.
                if (t.partial.size() > max_line_ + 4096) {
                    emit_line(t, t.partial, out);
                    t.emitted_off += t.partial.size();
                    t.partial.clear();
                }
                break;
            }
            if (t.partial.empty()) {
                emit_line(t, data.substr(0, nl), out);
                t.emitted_off += nl + 1;
            } else {
                t.partial.append(data.substr(0, nl));
                emit_line(t, t.partial, out);
                t.emitted_off += t.partial.size() + 1;
                t.partial.clear();
            }
            data.remove_prefix(nl + 1);
        }
    }
    // A last line without newline, at the end of the file and idle for a while: take it as it is.
    if (!t.partial.empty() && t.read_off >= size && realtime_ns() - t.last_growth_ns > idle_ns_) {
        emit_line(t, t.partial, out);
        t.emitted_off += t.partial.size();
        t.partial.clear();
    }
}

bool FileSource::poll(std::vector<Event>& out, size_t max_bytes) {
    // Listing a directory a user filled costs one lstat per entry: not on every pass.
    if (const int64_t now = monotonic_ns(); first_scan_ || now - last_scan_ns_ >= scan_interval_ns_) {
        last_scan_ns_ = now;
        scan();
    }
    size_t budget = max_bytes;
    backlog_ = 0;
    for (auto it = files_.begin(); it != files_.end();) {
        Tracked& t = it->second;
        read_file(t, out, budget);
        // Gone from the globs (renamed away or deleted) and read to its end: done with it.
        struct stat st {};
        const bool at_end = ::fstat(t.fd.get(), &st) == 0 && t.read_off >= static_cast<uint64_t>(st.st_size);
        if (!at_end && st.st_size > 0) backlog_ += static_cast<int64_t>(static_cast<uint64_t>(st.st_size) - t.read_off);
        if (!t.seen && at_end && t.partial.empty()) {
            it = files_.erase(it);
        } else {
            ++it;
        }
    }
    return budget == 0;
}

void FileSource::flush_partial(std::vector<Event>& out) {
    for (auto& [k, t] : files_) {
        struct stat st {};
        // Only a real last line: at the end of the file, not the cut of a bounded read.
        if (t.partial.empty() || ::fstat(t.fd.get(), &st) != 0 || t.read_off < static_cast<uint64_t>(st.st_size))
            continue;
        emit_line(t, t.partial, out);
        t.emitted_off += t.partial.size();
        t.partial.clear();
    }
}

nlohmann::json FileSource::checkpoint() const {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& [k, t] : files_)
        files.push_back({{"key", k}, {"path", t.path}, {"fp", t.fingerprint}, {"offset", t.emitted_off}});
    return {{"files", files}};
}

}  // namespace jobtrail::shipper
