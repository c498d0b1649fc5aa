#include "forensics/bundle.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <queue>
#include <set>
#include <thread>

#include "common/fs.hpp"
#include "common/hostlist.hpp"
#include "common/text.hpp"
#include "common/time.hpp"
#include "forensics/analysis.hpp"
#include "forensics/logql.hpp"
#include "forensics/report.hpp"
#include "forensics/staging_dir.hpp"
#include "joblog/format.hpp"
#include "jobtrail/version.hpp"
#include "kmsg/record.hpp"
#include "node/nccl_file.hpp"
#include "process/runner.hpp"

namespace jobtrail::forensics {
namespace fs = std::filesystem;
namespace {

// Every name in the bundle is made of path_component()s; checked again before a file is
// created and before a tar member is written, so a bug upstream cannot write outside.
bool clean_relative_path(std::string_view rel) {
    if (rel.empty() || rel.size() > 1024) return false;
    size_t at = 0;
    while (true) {
        const size_t slash = rel.find('/', at);
        const std::string_view c = rel.substr(at, slash == std::string_view::npos ? rel.npos : slash - at);
        if (c.empty() || c == "." || c == ".." || c.size() > 255) return false;
        for (const char ch : c)
            if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f || ch == '\\') return false;
        if (slash == std::string_view::npos) return true;
        at = slash + 1;
    }
}

std::string short_hostname() {
    char h[256] = {};
    ::gethostname(h, sizeof h - 1);
    std::string s(h);
    return s.substr(0, s.find('.'));
}

// The archive holds root's logs (prolog/epilog logs are 0640, kernel records): the file and
// its members are the operator's, who decides whom to give them to. 0600, not 0640: a group
// means nothing in a shared output directory or where the archive is extracted.
constexpr mode_t kArchiveMode = 0600;

// Files a bundle is being written into, below the staging directory; each source writes its
// own files, "<rfc3339> <line>" per record, in time order.
class Staging {
public:
    explicit Staging(StagingDir& dir) : dir_(dir) {}
    void write(const std::string& rel, int64_t ts, std::string_view line) {
        if (!clean_relative_path(rel)) throw std::runtime_error("refusing to stage " + escape_line(rel));
        std::lock_guard<std::mutex> lk(mu_);
        auto it = open_.find(rel);
        if (it == open_.end()) {
            if (open_.size() >= 128) open_.clear();  // bounded file handles; reopened in append mode
            File f = files_.count(rel) ? stream(rel, O_WRONLY | O_APPEND, "a") : stream(rel, O_CREAT, "w");
            it = open_.emplace(rel, std::move(f)).first;
            files_.insert(rel);
        }
        put(it->second.get(), {format_rfc3339_ns(ts), " ", line, "\n"});
        int64_t& last = last_[rel];
        if (ts < last) unordered_.insert(rel);
        last = std::max(last, ts);
    }
    // A job log's kernel lines go at their kernel time, hours before the lines written around
    // them: files that got such lines are put in time order here, as write_timeline needs.
    void close() {
        std::lock_guard<std::mutex> lk(mu_);
        open_.clear();
        for (const auto& rel : unordered_) sort_file(rel);
        unordered_.clear();
    }
    const std::set<std::string>& files() const { return files_; }

    // A staged file as a stream in `mode`: a new one (flags O_CREAT), or one made before opened
    // with `flags`; always relative to the staging directory's descriptor.
    File stream(const std::string& rel, int flags, const char* mode) const {
        auto fd = (flags & O_CREAT) ? dir_.create_file(rel) : dir_.open_file(rel, flags);
        if (!fd.ok) throw std::runtime_error(fd.error);
        auto f = open_stream(std::move(fd.value), mode, dir_.path() + "/" + rel);
        if (!f.ok) throw std::runtime_error(f.error);
        return std::move(f.value);
    }
    static void put(FILE* f, std::initializer_list<std::string_view> parts) {
        for (const auto p : parts) std::fwrite(p.data(), 1, p.size(), f);
    }

private:
    StagingDir& dir_;
    std::mutex mu_;
    std::map<std::string, File> open_;
    std::set<std::string> files_;
    std::map<std::string, int64_t> last_;
    std::set<std::string> unordered_;

    // Stable: a kmsg-dict line stays after its record. The file is one job's lines of one node,
    // rewritten in place through its descriptor.
    void sort_file(const std::string& rel) {
        const File f = stream(rel, O_RDWR, "r+");
        std::vector<std::string> lines;
        LineReader in(f.get());
        for (std::string l; in.next(l);) lines.push_back(std::move(l));
        std::stable_sort(lines.begin(), lines.end(),
                         [](const std::string& a, const std::string& b) { return a.compare(0, 30, b, 0, 30) < 0; });
        std::rewind(f.get());
        if (::ftruncate(::fileno(f.get()), 0) != 0)
            throw std::runtime_error("cannot rewrite " + dir_.path() + "/" + rel + ": " + errno_text(errno));
        for (const auto& l : lines) put(f.get(), {l, "\n"});
    }
};

// Lines of a file open_read_safe gave us, at most `max` bytes of it: a user's file can be
// endless (or grow while we read), and we run as root.
class BoundedLines {
public:
    // A line longer than max_line comes in pieces: a sparse file of zeros is one "line" as long
    // as the file, and must not be held (or escaped) whole.
    BoundedLines(int fd, uint64_t max, size_t max_line = 256 << 10) : fd_(fd), left_(max), max_line_(max_line) {}
    uint64_t consumed() const { return consumed_; }
    bool next(std::string& line) {
        while (true) {
            // From where the last search stopped: a long line costs one scan, not one per read.
            const size_t nl = buf_.find('\n', std::max(pos_, scanned_));
            if (nl != std::string::npos && nl - pos_ <= max_line_) {
                line.assign(buf_, pos_, nl - pos_);
                consumed_ += nl + 1 - pos_;
                pos_ = nl + 1;
                return true;
            }
            if (buf_.size() - pos_ > max_line_) {
                line.assign(buf_, pos_, max_line_);
                consumed_ += max_line_;
                pos_ += max_line_;
                return true;
            }
            scanned_ = buf_.size();
            if (!fill()) {
                if (pos_ >= buf_.size()) return false;
                line.assign(buf_, pos_);  // the last line, without its newline
                consumed_ += buf_.size() - pos_;
                pos_ = buf_.size();
                return true;
            }
        }
    }
    bool cut() const { return cut_; }

private:
    bool fill() {
        if (eof_) return false;
        char chunk[65536];
        const size_t want = left_ ? static_cast<size_t>(std::min<uint64_t>(sizeof chunk, left_)) : 1;
        ssize_t n;
        do n = ::read(fd_, chunk, want);
        while (n < 0 && errno == EINTR);
        if (n <= 0 || !left_) {
            eof_ = true;
            cut_ = n > 0 && !left_;  // one byte past the bound: there was more
            return false;
        }
        buf_.erase(0, pos_);
        scanned_ -= std::min(scanned_, pos_);
        pos_ = 0;
        buf_.append(chunk, static_cast<size_t>(n));
        left_ -= static_cast<uint64_t>(n);
        return true;
    }
    int fd_;
    uint64_t left_;
    size_t max_line_;
    uint64_t consumed_ = 0;
    std::string buf_;
    size_t pos_ = 0, scanned_ = 0;
    bool eof_ = false, cut_ = false;
};

// A file of a user's directory that was not read, and why.
struct Refused {
    std::string path, reason, error;
};

constexpr size_t kMaxJobNodes = 16384;  // expand_hostlist's default bound, for all nodelists together

// Which step each NCCL process (host:pid) of a node was, from the lines that say it: the first
// line of each file the shipper sent, and one every ten minutes after. A pid used again by a
// later step is that step's from its own first line on; a line stamped before any of them is
// the earliest's. Anyone who can push to Loki writes these: steps that could not name a file
// are ignored, and the count is bounded.
class NcclSteps {
public:
    static constexpr size_t kMax = 65536;  // (process, step) changes kept for one node
    static constexpr const char* kUnknown = "unknown";
    static constexpr int64_t kSaidEveryNs = 600'000'000'000;  // the shipper's Origin::kSayAgainNs

    static bool usable(const std::string& step) { return node::plain_name_part(step) && step != kUnknown; }
    void add(const loki::QueryEntry& e, const std::string& step, const std::string& file) {
        if (!usable(step) || kept_ >= kMax) return;
        std::string key;
        if (!file.empty()) {
            // A line that did not say where it came from carries its file's name.
            const auto f = node::parse_nccl_file(file);
            if (!f || !node::plain_name_part(f->host) || !node::plain_name_part(f->pid)) return;
            key = f->host + ":" + f->pid;
        } else if (const auto o = node::nccl_line_origin(e.line)) {
            key = std::string(o->host) + ":" + std::string(o->pid);
        } else {
            return;
        }
        auto& said = by_process_[key];
        if (!said.empty() && said.back().second == step && said.back().first <= e.ts_ns) return;
        said.emplace_back(e.ts_ns, step);
        ++kept_;
    }
    // Once every line that says a step is in.
    void done() {
        for (auto& [k, said] : by_process_) std::stable_sort(said.begin(), said.end(), by_time);
    }
    std::string step_of(std::string_view host, std::string_view pid, int64_t ts) const {
        const auto it = by_process_.find(std::string(host) + ":" + std::string(pid));
        if (it == by_process_.end() || it->second.empty()) return kUnknown;
        const auto& said = it->second;
        auto at = std::upper_bound(said.begin(), said.end(), std::make_pair(ts, std::string()), by_time);
        return at == said.begin() ? at->second : std::prev(at)->second;
    }

private:
    static bool by_time(const std::pair<int64_t, std::string>& a, const std::pair<int64_t, std::string>& b) {
        return a.first < b.first;
    }
    std::map<std::string, std::vector<std::pair<int64_t, std::string>>, std::less<>> by_process_;
    size_t kept_ = 0;
};

// "prolog meta nodelist=gpu[01-04]" -> "gpu[01-04]" for key "nodelist"; "" if not such a line.
std::string meta_value(std::string_view line, std::string_view key) {
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos) return {};
    std::string_view rest = line.substr(sp + 1);
    if (!starts_with(rest, "meta ")) return {};
    rest.remove_prefix(5);
    if (!starts_with(rest, key) || rest.size() <= key.size() || rest[key.size()] != '=') return {};
    return std::string(rest.substr(key.size() + 1, 4096));
}

struct QueryRecord {
    QueryRecord() = default;
    QueryRecord(std::string n, std::string q) : name(std::move(n)), logql(std::move(q)) {}
    std::string name, logql;
    uint64_t lines = 0;
    double seconds = 0;
    bool truncated = false, failed = false;
    std::string error;
};

std::string source_of(const std::string& rel) {
    if (rel.rfind("nccl/", 0) == 0) return "nccl";
    return fs::path(rel).stem().string();
}

std::string node_of(const std::string& rel) {
    const auto p = fs::path(rel);
    auto it = p.begin();
    if (it == p.end()) return "";
    ++it;  // nodes/<node>/... or nccl/<node>/...
    return it == p.end() ? "" : it->string();
}

// Merges every staged file (each in time order) into one timeline, k-way: one line per file in
// memory at a time.
void write_timeline(const Staging& st) {
    struct Cursor {
        File f;
        std::optional<LineReader> in;
        std::string line, node, source;
    };
    std::vector<std::unique_ptr<Cursor>> cs;
    for (const auto& rel : st.files()) {
        auto c = std::make_unique<Cursor>();
        c->f = st.stream(rel, O_RDONLY, "r");
        c->in.emplace(c->f.get());
        c->node = node_of(rel);
        c->source = source_of(rel);
        if (c->in->next(c->line)) cs.push_back(std::move(c));
    }
    auto later = [&](size_t a, size_t b) {
        // RFC 3339 with nine digits, all UTC: text order is time order.
        return cs[a]->line.compare(0, 30, cs[b]->line, 0, 30) > 0;
    };
    std::priority_queue<size_t, std::vector<size_t>, decltype(later)> heap(later);
    for (size_t i = 0; i < cs.size(); ++i) heap.push(i);
    const File out = st.stream("timeline.txt", O_CREAT, "w");
    while (!heap.empty()) {
        const size_t i = heap.top();
        heap.pop();
        Cursor& c = *cs[i];
        const size_t sp = c.line.find(' ');
        const std::string_view l = c.line;
        Staging::put(out.get(), {l.substr(0, sp), " ", c.node, " ", c.source, " ",
                                 sp == std::string::npos ? "" : l.substr(sp + 1), "\n"});
        if (c.in->next(c.line)) heap.push(i);
    }
}

// SHA-256 of a file from its start, as lowercase hex; empty if it cannot be read.
std::string sha256_fd(int fd) {
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
    char buf[65536];
    off_t at = 0;
    for (ssize_t n; (n = ::pread(fd, buf, sizeof buf, at)) != 0; at += n) {
        if (n < 0) return "";
        EVP_DigestUpdate(ctx.get(), buf, static_cast<size_t>(n));
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx.get(), md, &n);
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < n; ++i) {
        out += hex[md[i] >> 4];
        out += hex[md[i] & 15];
    }
    return out;
}

// Members are read back through the staging directory's descriptors; `out` is a new file.
Status write_archive(const StagingDir& dir, const std::string& top, const std::vector<std::string>& files,
                     const OutputFile& out, const std::string& path) {
    struct archive* a = archive_write_new();
    archive_write_add_filter_zstd(a);
    archive_write_set_format_pax_restricted(a);
    if (archive_write_open_fd(a, out.fd()) != ARCHIVE_OK) {
        auto st = Status::failure(std::string("cannot write ") + path + ": " + archive_error_string(a));
        archive_write_free(a);
        return st;
    }
    const time_t now = ::time(nullptr);
    for (const auto& rel : files) {
        if (!clean_relative_path(top + "/" + rel)) continue;  // never a member that escapes on extraction
        auto in = dir.open_file(rel, O_RDONLY);
        struct stat sb {};
        if (!in.ok || ::fstat(in.value.get(), &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        struct archive_entry* e = archive_entry_new();
        archive_entry_set_pathname(e, (top + "/" + rel).c_str());
        archive_entry_set_size(e, sb.st_size);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, kArchiveMode);
        archive_entry_set_mtime(e, now, 0);
        archive_write_header(a, e);
        char buf[65536];
        for (ssize_t n; (n = ::read(in.value.get(), buf, sizeof buf)) != 0;) {
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) break;
            archive_write_data(a, buf, static_cast<size_t>(n));
        }
        archive_entry_free(e);
    }
    Status st;
    if (archive_write_close(a) != ARCHIVE_OK) st = Status::failure(std::string("archive: ") + archive_error_string(a));
    archive_write_free(a);
    return st;
}

// --- where the job ran and when ---------------------------------------------------------------

struct Window {
    std::vector<std::string> nodes;
    int64_t start_ns = 0, end_ns = 0;
    std::string basis;
};

bool window_from_slurm(const BundleOptions& o, Window& w) {
    const char* env_path = std::getenv("PATH");
    const std::string path = env_path ? env_path : "/usr/bin:/bin";
    const std::string sacct = o.sacct.find('/') == std::string::npos ? process::find_in_path(o.sacct, path) : o.sacct;
    if (sacct.empty()) return false;
    process::RunOptions ro;
    ro.timeout_ms = 15'000;
    ro.env = {"SLURM_TIME_FORMAT=%s", "PATH=/usr/bin:/bin"};
    std::string out;
    process::run({sacct, "-j", o.job_id, "-X", "-n", "-P", "-o", "Start,End,NodeList"}, ro,
                 [&](process::Stream s, int64_t, std::string_view l) {
                     if (s == process::Stream::kStdout && out.empty()) out = std::string(l);
                 });
    // "1795989142|1795989342|gpu[01-02]"
    const size_t a = out.find('|'), b = a == std::string::npos ? a : out.find('|', a + 1);
    if (b == std::string::npos) return false;
    const int64_t start = std::atoll(out.substr(0, a).c_str());
    int64_t end = std::atoll(out.substr(a + 1, b - a - 1).c_str());
    const std::string nodelist = out.substr(b + 1);
    if (start <= 0 || nodelist.empty() || nodelist == "None assigned") return false;
    if (end <= 0) end = realtime_ns() / 1'000'000'000;  // still running
    const std::string scontrol = process::find_in_path(o.scontrol, path);
    std::vector<std::string> nodes;
    if (!scontrol.empty()) {
        process::run({scontrol, "show", "hostnames", nodelist}, ro,
                     [&](process::Stream s, int64_t, std::string_view l) {
                         if (s == process::Stream::kStdout && !l.empty()) nodes.emplace_back(l);
                     });
    }
    if (nodes.empty()) nodes.push_back(nodelist);
    w.nodes = nodes;
    w.start_ns = start * 1'000'000'000;
    w.end_ns = end * 1'000'000'000;
    w.basis = "sacct";
    return true;
}

// --- the collectors: Loki and local files ----------------------------------------------------

class Collection {
public:
    Collection(const BundleOptions& o, Staging& st, Analyzer& an) : o_(o), st_(st), an_(an) {}

    void record(const std::string& node, const std::string& source, const std::string& rel, int64_t ts,
                std::string_view raw, int when = 0) {
        // One record, one line: a newline from Loki must not forge a record of its own.
        const std::string line = escape_line(raw);
        st_.write(rel, ts, line);
        std::lock_guard<std::mutex> lk(an_mu_);
        an_.add(node, source, ts, line, when);
    }

    // Where a job log line goes in time: kernel records (and their kmsg-dict lines) at the
    // record's own time= (the line is stamped when the collector wrote it), the rest as stamped.
    // `line` is "<phase> <tag>[<name>] <text>" as the shipper sends it, or "<tag> <text>".
    int64_t kernel_time(const std::string& node, const std::string& phase, std::string_view line, int64_t ts) {
        if (starts_with(line, phase + " ")) line.remove_prefix(phase.size() + 1);
        const size_t sp = line.find(' ');
        if (sp == std::string_view::npos) return ts;
        const std::string_view tag = line.substr(0, sp);
        std::lock_guard<std::mutex> lk(kernel_mu_);
        int64_t& last = last_kernel_[node + "|" + phase];
        if (tag == joblog::kKmsg || tag == joblog::kKmsgContext) {
            const auto t = kmsg::header_line_time(line.substr(sp + 1));
            last = t ? *t : 0;
            return t ? *t : ts;
        }
        if (tag == joblog::kKmsgDict && last) return last;
        return ts;
    }

    QueryRecord run_query(const std::string& name, const std::string& logql, int64_t start, int64_t end,
                          const std::function<void(const loki::QueryEntry&)>& sink) {
        QueryRecord r{name, logql};
        const int64_t t0 = monotonic_ns();
        loki::Client client(o_.endpoint);
        client.load_secrets();  // unreadable: said once, when the job is looked up
        // query_range splits by Loki's max_query_length.
        const auto res = loki::query_range(client, logql, start, end, o_.query, sink);
        r.lines = res.entries;
        r.truncated = res.truncated;
        r.failed = res.failed;
        r.error = res.error;
        r.seconds = static_cast<double>(monotonic_ns() - t0) / 1e9;
        return r;
    }

    std::vector<QueryRecord> from_loki(const Window& w) {
        struct Query {
            std::string logql;
            std::function<void(const loki::QueryEntry&)> sink;
            int64_t lookback_ns = 0;  // before the window's start
        };
        struct Task {
            std::string name, logql;
            std::function<void(const loki::QueryEntry&)> sink;
            // Run first when set, then after_before; should it fail, the task's record says so
            // (its lines are all there, some under a name without their step).
            Query before = {};
            std::function<void()> after_before = {};
        };
        std::vector<Task> tasks;
        auto label = [](const loki::QueryEntry& e, const char* k) {
            auto it = e.labels->find(k);
            return it == e.labels->end() ? std::string() : it->second;
        };
        tasks.push_back(
            {"prolog and epilog", prolog_epilog_query(o_.schema, o_.job_id), [this, label](const loki::QueryEntry& e) {
                 const std::string node = path_component(label(e, "node"));
                 std::string phase = label(e, "phase");
                 if (phase.empty()) phase = starts_with(e.line, "epilog") ? "epilog" : "prolog";
                 // Anyone who can push to Loki can set it: only the two phases name
                 // files as such; anything else is kept, apart and escaped.
                 if (phase != "prolog" && phase != "epilog") phase = "phase-" + path_component(phase);
                 record(node, phase, "nodes/" + node + "/" + phase + ".log", kernel_time(node, phase, e.line, e.ts_ns),
                        e.line);
             }});
        for (const auto& n : w.nodes) {
            const std::string node = path_component(n);
            // One NCCL query per node: bounded queries that run in parallel. Before it, the
            // lines that say a process's step (a few per file), for the lines that do not.
            auto steps = std::make_shared<NcclSteps>();
            Task t{"NCCL " + escape_line(n), nccl_query(o_.schema, o_.job_id, n),
                   [this, node, label, steps](const loki::QueryEntry& e) {
                       // Its name, or its step and what the line says (the shipper sends the
                       // name only when the line does not).
                       std::string file = label(e, "file");
                       if (const auto o = node::nccl_line_origin(e.line); o && file.empty()) {
                           std::string step = label(e, "step");  // every line's, from older shippers
                           if (!NcclSteps::usable(step)) step = steps->step_of(o->host, o->pid, e.ts_ns);
                           file = node::nccl_file_name(step, o->host, o->pid);
                       }
                       if (file.empty()) file = "nccl.log";
                       record(node, "nccl", "nccl/" + node + "/" + path_component(file), e.ts_ns, e.line);
                   }};
            // From ten minutes before the window: a file says its step again after ten minutes.
            t.before = {
                nccl_step_query(o_.schema, o_.job_id, n),
                [steps, label](const loki::QueryEntry& e) { steps->add(e, label(e, "step"), label(e, "file")); },
                NcclSteps::kSaidEveryNs};
            t.after_before = [steps] { steps->done(); };
            tasks.push_back(std::move(t));
            tasks.push_back(
                {"kernel " + escape_line(n), kernel_query(o_.schema, n), [this, node](const loki::QueryEntry& e) {
                     record(node, "kmsg", "nodes/" + node + "/kmsg.log", e.ts_ns, e.line);
                 }});
            tasks.push_back({"slurmd " + escape_line(n), slurmd_query(o_.schema, n, o_.job_id),
                             [this, node](const loki::QueryEntry& e) {
                                 record(node, "slurmd", "nodes/" + node + "/slurmd.log", e.ts_ns, e.line);
                             }});
            tasks.push_back({"fabric manager " + escape_line(n), fabric_manager_query(o_.schema, n),
                             [this, node](const loki::QueryEntry& e) {
                                 record(node, "fabric-manager", "nodes/" + node + "/fabric-manager.log", e.ts_ns,
                                        e.line);
                             }});
        }
        std::vector<QueryRecord> done(tasks.size());
        std::atomic<size_t> next{0}, finished{0};
        std::vector<std::thread> pool;
        for (int t = 0; t < std::max(1, o_.parallel); ++t) {
            pool.emplace_back([&] {
                for (size_t i; (i = next++) < tasks.size();) {
                    // An exception here would end the process (std::terminate) and leave the
                    // staging directory: the query fails instead, and the bundle is partial.
                    try {
                        Task& task = tasks[i];
                        QueryRecord pre;
                        if (task.before.sink) {
                            try {
                                pre = run_query(task.name, task.before.logql, w.start_ns - task.before.lookback_ns,
                                                w.end_ns, task.before.sink);
                            } catch (const std::exception& ex) {
                                // The task's own query still runs: its lines, some named less well.
                                pre.failed = true;
                                pre.error = escape_line(ex.what());
                            }
                            if (task.after_before) task.after_before();
                        }
                        done[i] = run_query(task.name, task.logql, w.start_ns, w.end_ns, task.sink);
                        if (pre.failed || pre.truncated) {
                            done[i].failed = done[i].failed || pre.failed;
                            done[i].truncated = done[i].truncated || pre.truncated;
                            if (done[i].error.empty())
                                done[i].error = "steps (" + task.before.logql + "): " + pre.error;
                        }
                        done[i].seconds += pre.seconds;
                    } catch (const std::exception& ex) {
                        done[i] = QueryRecord{tasks[i].name, tasks[i].logql};
                        done[i].failed = true;
                        done[i].error = escape_line(ex.what());
                    }
                    tasks[i] = Task{};  // what its callbacks held (a node's steps) goes now
                    const size_t k = ++finished;
                    if (o_.progress)
                        std::fprintf(stderr, "jobtrail: [%zu/%zu] %s: %llu lines%s\n", k, tasks.size(),
                                     done[i].name.c_str(), static_cast<unsigned long long>(done[i].lines),
                                     done[i].failed ? (" FAILED: " + done[i].error).c_str() : "");
                }
            });
        }
        for (auto& t : pool) t.join();
        return done;
    }

    // This node's job logs and NCCL files; the kernel records are the ones the collectors kept
    // in the job logs (before the job: kmsg-context, during it: kmsg).
    std::vector<QueryRecord> from_local(Window& w, std::string& node_out) {
        std::vector<QueryRecord> out;
        std::string node = short_hostname();
        for (const std::string phase : {"prolog", "epilog"}) {
            const std::string path = o_.log_dir + "/" + phase + "/" + o_.job_id + ".log";
            QueryRecord r{"local " + phase, path};
            SafeFile f = open_read_safe(path);
            if (!f.fd.valid()) {
                r.failed = f.refused != Refusal::kMissing;
                r.error = r.failed ? escape_line(f.error) : "no such file";
                if (r.failed) refuse(path, f);
                out.push_back(r);
                continue;
            }
            BoundedLines in(f.fd.get(), o_.max_file_bytes);
            std::string raw;
            while (in.next(raw)) {
                joblog::Line l;
                if (!joblog::parse_line(raw, l)) continue;
                ++r.lines;
                if (l.tag == joblog::kMeta && starts_with(l.text, "node=")) node = std::string(l.text.substr(5));
                if (l.tag == joblog::kKmsg || l.tag == joblog::kKmsgContext)
                    l.ts_ns = kmsg::header_line_time(l.text).value_or(l.ts_ns);
                if (!w.start_ns || l.ts_ns < w.start_ns) w.start_ns = l.ts_ns;
                w.end_ns = std::max(w.end_ns, l.ts_ns);
                if (l.tag == joblog::kKmsg || l.tag == joblog::kKmsgContext) {
                    kmsg::Record rec;
                    kmsg::ParseError perr;
                    if (!kmsg::parse_record(unescape_hex(l.text), rec, perr)) continue;
                    const std::string rel = "nodes/" + path_component(node) + "/kmsg.log";
                    // A user process's write to /dev/kmsg is kept for the reader, never analysed.
                    // The prolog's kernel context is from before the job.
                    if (rec.facility == 0)
                        record(path_component(node), "kmsg", rel, l.ts_ns, rec.message,
                               l.tag == joblog::kKmsgContext ? -1 : 0);
                    else
                        st_.write(rel, l.ts_ns, rec.message);
                    continue;
                }
                if (l.tag == joblog::kKmsgDict) continue;
                const std::string line = phase + " " + std::string(l.tag) +
                                         (l.name.empty() ? "" : "[" + std::string(l.name) + "]") + " " +
                                         std::string(l.text);
                record(path_component(node), phase, "nodes/" + path_component(node) + "/" + phase + ".log", l.ts_ns,
                       line);
            }
            r.truncated = in.cut();
            out.push_back(r);
        }
        const std::string nccl_dir = (o_.nccl_dir.empty() ? o_.log_dir + "/nccl" : o_.nccl_dir) + "/" + o_.job_id;
        QueryRecord nr{"local NCCL", nccl_dir + "/*.log"};
        std::error_code ec;
        std::vector<std::pair<std::string, bool>> names;  // (name, is a directory)
        if (fs::is_symlink(fs::symlink_status(nccl_dir, ec))) {
            SafeFile f;
            f.refused = Refusal::kSymlink;
            f.error = nccl_dir + ": the job's NCCL directory is a symbolic link";
            refuse(nccl_dir, f);
        } else {
            for (const auto& e : fs::directory_iterator(nccl_dir, ec))
                names.emplace_back(e.path().filename().string(),
                                   e.symlink_status(ec).type() == fs::file_type::directory);
        }
        std::sort(names.begin(), names.end());
        // The user decides how many files and how many bytes there are: the bundle takes a bounded
        // share of them, and says what it left.
        size_t files_read = 0;
        uint64_t bytes_read = 0;
        for (const auto& [name, is_dir] : names) {
            const std::string path = nccl_dir + "/" + name;
            SafeFile f;
            if (files_read >= o_.max_local_files || bytes_read >= o_.max_local_bytes) {
                f.refused = Refusal::kTooMany;
                f.error = path + ": past the bundle's limit of " + std::to_string(o_.max_local_files) + " files or " +
                          std::to_string(o_.max_local_bytes) + " bytes of NCCL output";
                nr.truncated = true;
                refuse(name, f);
                continue;
            }
            if (is_dir) {
                f.refused = Refusal::kNotRegular;
                f.error = path + ": is a directory (not followed)";
            } else {
                f = open_read_safe(path);
            }
            if (!f.fd.valid()) {
                if (f.refused != Refusal::kMissing) refuse(name, f);
                continue;
            }
            const std::string rel = "nccl/" + path_component(node) + "/" + path_component(name);
            ++files_read;
            BoundedLines in(f.fd.get(), std::min(o_.max_file_bytes, o_.max_local_bytes - bytes_read));
            std::string raw;
            int64_t last = w.start_ns;
            while (in.next(raw)) {
                if (raw.size() > 2 && raw[0] == '[') {
                    const size_t close = raw.find(']');
                    if (close != std::string::npos)
                        if (auto t = parse_rfc3339_ns(std::string_view(raw).substr(1, close - 1))) last = *t;
                }
                ++nr.lines;
                record(path_component(node), "nccl", rel, last, raw);
            }
            bytes_read += in.consumed();
            if (in.cut()) {
                nr.truncated = true;
                record(path_component(node), "nccl", rel, last,
                       "[jobtrail] cut here: the file is longer than " +
                           std::to_string(std::min(o_.max_file_bytes, in.consumed())) + " bytes");
            }
        }
        out.push_back(nr);
        node_out = node;
        return out;
    }

    const std::vector<Refused>& refused() const { return refused_; }

private:
    // Said on stderr as it happens and kept for the manifest.
    void refuse(const std::string& name, const SafeFile& f) {
        refused_.push_back({escape_line(name), refusal_name(f.refused), escape_line(f.error)});
        std::fprintf(stderr, "jobtrail: not bundled: %s\n", refused_.back().error.c_str());
    }

    std::vector<Refused> refused_;
    const BundleOptions& o_;
    Staging& st_;
    Analyzer& an_;
    std::mutex an_mu_;
    std::mutex kernel_mu_;
    std::map<std::string, int64_t> last_kernel_;  // node|phase: the last kernel record's time
};

std::string utc_stamp(int64_t ns) {
    std::string s = format_rfc3339_ns(ns);  // 2026-11-29T21:52:22.146801327Z
    return s.substr(0, 4) + s.substr(5, 2) + s.substr(8, 2) + "T" + s.substr(11, 2) + s.substr(14, 2) +
           s.substr(17, 2) + "Z";
}

}  // namespace

std::string path_component(std::string_view v) {
    static const char* hex = "0123456789ABCDEF";
    if (v.empty()) return "~empty";
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) {
        const auto c = static_cast<unsigned char>(v[i]);
        if ((std::isalnum(c) && c < 0x80) || c == '-' || c == '_' || (c == '.' && i > 0)) {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    constexpr size_t kMax = 128, kKeep = 96;
    if (out.size() <= kMax) return out;
    // '~' is never in an uncut name: a cut one cannot collide with one.
    size_t keep = kKeep;  // not inside a %XX
    if (out[keep - 1] == '%')
        keep -= 1;
    else if (out[keep - 2] == '%')
        keep -= 2;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(v.data(), v.size(), md, &n, EVP_sha256(), nullptr);
    out.resize(keep);
    out += '~';
    for (unsigned int i = 0; i < 8; ++i) {
        out += hex[md[i] >> 4];
        out += hex[md[i] & 15];
    }
    return out;
}

std::string sha256_file(const std::string& path) {
    const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    return fd.valid() ? sha256_fd(fd.get()) : "";
}

BundleResult make_bundle(const BundleOptions& o) {
    BundleResult res;
    if (!node::valid_job_id(o.job_id)) {
        res.exit_code = kExitUsage;
        res.error = "bad job id \"" + escape_line(o.job_id) + "\": want the numeric Slurm job id";
        return res;
    }
    const int64_t started = realtime_ns();
    auto fail = [&res](std::string why) {
        res.exit_code = kExitError;
        res.error = std::move(why);
        res.archive.clear();
        return res;
    };
    // Gone on every way out, exceptions included.
    auto staging = StagingDir::create(o.out_dir, ".jobtrail-job" + path_component(o.job_id));
    if (!staging.ok) return fail(staging.error);
    Staging st(staging.value);
    Analyzer an;
    Collection col(o, st, an);
    Window w;
    std::set<std::string> missing_nodes;  // in the job's nodelist, without a prolog/epilog record
    std::string nodelist_notes;
    w.nodes = o.nodes;
    w.start_ns = o.start_ns;
    w.end_ns = o.end_ns;
    std::vector<QueryRecord> queries;
    std::string source;

    if (o.local) {
        std::string node;
        queries = col.from_local(w, node);
        if (w.nodes.empty()) w.nodes = {node};
        w.basis = "local job logs";
        w.start_ns -= o.margin_ns;  // the window the records came from, as in the Loki case
        w.end_ns += o.margin_ns;
        source = "local " + o.log_dir;
    } else {
        bool end_known = o.end_ns != 0;
        loki::Client probe(o.endpoint);
        source = probe.describe();
        if (w.nodes.empty() || !w.start_ns) {
            // Where and when: the collectors' records in Loki, else Slurm's accounting.
            Window found;
            bool epilog_ended = false;
            std::set<std::string> nodes;
            std::set<std::string> nodelists;  // what SLURM_JOB_NODELIST said on each node
            std::string cluster_label;
            loki::Client client(o.endpoint);
            if (auto secrets = client.load_secrets(); !secrets.ok)
                std::fprintf(stderr, "jobtrail: %s (querying without those credentials)\n", secrets.error.c_str());
            const int64_t now = realtime_ns();
            QueryRecord q{"find the job", prolog_epilog_query(o.schema, o.job_id)};
            const auto r = loki::query_range(
                client, q.logql, now - o.lookback_ns, now + 60'000'000'000, o.query, [&](const loki::QueryEntry& e) {
                    if (auto it = e.labels->find("node"); it != e.labels->end()) nodes.insert(it->second);
                    if (auto v = meta_value(e.line, "nodelist"); !v.empty() && nodelists.size() < 16)
                        nodelists.emplace(v);
                    if (auto it = e.labels->find("cluster"); it != e.labels->end()) cluster_label = it->second;
                    if (!found.start_ns || e.ts_ns < found.start_ns) found.start_ns = e.ts_ns;
                    found.end_ns = std::max(found.end_ns, e.ts_ns);
                    if (starts_with(e.line, "epilog end ")) epilog_ended = true;
                });
            q.lines = r.entries;
            q.failed = r.failed;
            q.error = r.error;
            queries.push_back(q);
            if (!nodes.empty()) {
                // A node whose shipper is down or behind has no records: the nodelist names it.
                std::set<std::string> all = nodes;
                for (const auto& l : nodelists) {
                    auto expanded = expand_hostlist(l);
                    if (!expanded.ok) {
                        nodelist_notes += "the job's nodelist is unusable (" + escape_line(expanded.error) +
                                          "): its nodes are those with records\n";
                        continue;
                    }
                    // Forged nodelists (anyone who can push) must not multiply the queries.
                    if (all.size() + expanded.value.size() > kMaxJobNodes) {
                        nodelist_notes += "the job's nodelists name more than " + std::to_string(kMaxJobNodes) +
                                          " nodes: " + escape_line(l.substr(0, 200)) + " left out\n";
                        continue;
                    }
                    for (auto& h : expanded.value)
                        if (all.insert(h).second) missing_nodes.insert(h);
                }
                found.nodes.assign(all.begin(), all.end());
                found.basis = nodelists.empty() ? "prolog/epilog records in Loki"
                                                : "prolog/epilog records in Loki and the job's nodelist";
            } else if (!window_from_slurm(o, found)) {
                found = {};
            }
            if (w.nodes.empty()) w.nodes = found.nodes;
            if (!w.start_ns) {
                w.start_ns = found.start_ns;
                w.end_ns = found.end_ns;
                // Without an epilog's end (running, or its node died) the last record is no end.
                end_known = epilog_ended || (nodes.empty() && found.end_ns);
            }
            w.basis = found.basis.empty() ? "options" : found.basis;
            if (!cluster_label.empty()) an.facts().cluster = cluster_label;
            if (w.nodes.empty() || !w.start_ns) {
                res.exit_code = r.failed ? kExitPartial : kExitNotFound;
                res.error = r.failed ? (r.http_status ? "cannot find job " + o.job_id + ": " + r.error
                                                      : "cannot reach Loki to find job " + o.job_id + ": " + r.error)
                                     : "job " + o.job_id + ": no prolog/epilog records in Loki over the last " +
                                           std::to_string(o.lookback_ns / 3'600'000'000'000) +
                                           " h and no accounting record; give --nodes, --start and --end";
                return res;
            }
        } else {
            w.basis = "options";
        }
        if (!w.end_ns) {
            w.end_ns = realtime_ns();
            end_known = false;
        }
        // Before the records come: they are grouped by it. Not from local files (their window
        // is what they hold, the prolog's kernel context included).
        an.facts().job_start_ns = w.start_ns;
        an.facts().job_end_ns = end_known ? w.end_ns : 0;
        w.start_ns -= o.margin_ns;
        w.end_ns += o.margin_ns;
        auto got = col.from_loki(w);
        queries.insert(queries.end(), got.begin(), got.end());
    }
    st.close();
    if (o.local && st.files().empty()) {
        res.exit_code = kExitNotFound;
        res.error = "job " + o.job_id + ": no job logs under " + o.log_dir;
        return res;
    }

    JobFacts& facts = an.facts();
    facts.job_id = o.job_id;
    facts.nodes = w.nodes;
    facts.start_ns = w.start_ns;
    facts.end_ns = w.end_ns;
    // The configured cluster name wins; without one, what the records say.
    if (facts.cluster.empty() || o.cluster != "default") facts.cluster = o.cluster;
    const std::string top =
        path_component(facts.cluster) + "-job" + path_component(o.job_id) + "-" + utc_stamp(started);
    write_timeline(st);
    res.summary = an.summary_text();
    if (!o.local) {
        constexpr int64_t kHour = 3'600'000'000'000;
        const int64_t now = realtime_ns();
        // Loki asks its ingesters only for the last query_ingesters_within (3h): lines stamped
        // earlier that arrived late (a shipper backlog) stay invisible until a chunk flush
        // (max_chunk_age 2h) writes them to storage.
        if (w.end_ns > now - 5 * kHour)
            res.summary +=
                "\nNOTE\n----\nthe window is recent: lines stamped more than 3 h ago that reached Loki late (a "
                "shipper backlog) are invisible to queries until Loki flushes them (query_ingesters_within 3h, "
                "max_chunk_age 2h); if something seems missing, run the bundle again in a few hours\n";
        if (o.query.max_query_lookback_ns && w.start_ns < now - o.query.max_query_lookback_ns)
            res.summary += "\nNOTE\n----\nthe window starts before Loki's max_query_lookback (" +
                           std::to_string(o.query.max_query_lookback_ns / kHour) + " h): records older than " +
                           format_rfc3339_ns(now - o.query.max_query_lookback_ns) +
                           " cannot be queried and are missing\n";
    }
    if (!missing_nodes.empty()) {
        std::string list;
        for (const auto& n : missing_nodes) list += (list.empty() ? "" : ", ") + escape_line(n);
        res.summary += "\nMISSING NODES\n-------------\n" + list +
                       ": in the job's nodelist but without any prolog/epilog record in Loki (the node's "
                       "shipper down or behind?); this bundle lacks their story: run it again once they ship\n";
    }
    if (!nodelist_notes.empty()) res.summary += "\nNOTE\n----\n" + nodelist_notes;
    if (auto ws = staging.value.write_file("summary.txt", res.summary); !ws.ok) return fail(ws.error);
    const auto findings = an.findings();
    if (auto ws =
            staging.value.write_file("report.html", render_report_html(facts, findings, an.likely_cause(findings)));
        !ws.ok)
        return fail(ws.error);

    bool partial = !missing_nodes.empty();
    nlohmann::ordered_json mq = nlohmann::ordered_json::array();
    for (const auto& q : queries) {
        partial |= q.failed;
        mq.push_back({{"name", q.name},
                      {"query", q.logql},
                      {"lines", q.lines},
                      {"seconds", q.seconds},
                      {"truncated", q.truncated},
                      {"failed", q.failed},
                      {"error", q.error}});
    }
    nlohmann::ordered_json refused = nlohmann::ordered_json::array();
    for (const auto& r : col.refused()) refused.push_back({{"path", r.path}, {"reason", r.reason}, {"error", r.error}});
    std::vector<std::string> files(st.files().begin(), st.files().end());
    files.insert(files.begin(), {"summary.txt", "timeline.txt", "report.html"});
    nlohmann::ordered_json mf = nlohmann::ordered_json::array();
    for (const auto& f : files) {
        struct stat sb {};
        std::string sum;
        if (auto in = staging.value.open_file(f, O_RDONLY); in.ok && ::fstat(in.value.get(), &sb) == 0)
            sum = sha256_fd(in.value.get());
        mf.push_back({{"path", f}, {"bytes", sb.st_size}, {"sha256", sum}});
    }
    const nlohmann::ordered_json manifest = {
        {"jobtrail_version", kVersion},
        {"command", o.command_line},
        {"created", format_rfc3339_ns(started)},
        {"source", source},
        {"job", {{"id", o.job_id}, {"nodes", w.nodes}, {"missing_nodes", missing_nodes}, {"basis", w.basis}}},
        {"window",
         {{"start", format_rfc3339_ns(w.start_ns)},
          {"end", format_rfc3339_ns(w.end_ns)},
          {"margin_s", o.margin_ns / 1'000'000'000}}},
        {"queries", mq},
        {"complete", !partial},
        {"refused", refused},
        {"files", mf}};
    if (auto ws = staging.value.write_file(
            "manifest.json", manifest.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
        !ws.ok)
        return fail(ws.error);
    files.insert(files.begin(), "manifest.json");

    // Each written under a fresh name, then renamed onto its own: a link planted at the name is
    // replaced, never written through; half an archive (its temporary file) goes with `archive`.
    const std::string name = top + ".tar.zst";
    res.archive = o.out_dir + "/" + name;
    auto archive = staging.value.create_output(name, kArchiveMode);
    if (!archive.ok) return fail(archive.error);
    if (auto ws = write_archive(staging.value, top, files, archive.value, res.archive); !ws.ok) return fail(ws.error);
    auto sums = staging.value.create_output(name + ".sha256", 0644);  // says nothing of the content
    if (!sums.ok) return fail(sums.error);
    if (!write_all(sums.value.fd(), sha256_fd(archive.value.fd()) + "  " + name + "\n"))
        return fail("cannot write " + res.archive + ".sha256: " + errno_text(errno));
    if (auto p = archive.value.publish(); !p.ok) return fail(p.error);
    if (auto p = sums.value.publish(); !p.ok) {
        res.exit_code = kExitError;  // the archive is there, without its checksum
        res.error = p.error;
        return res;
    }
    res.exit_code = partial ? kExitPartial : kExitOk;
    if (partial) {
        std::string why;
        for (const auto& n : missing_nodes) why += (why.empty() ? "" : ", ") + escape_line(n);
        if (!why.empty()) why = "no records from node(s) " + why;
        if (std::any_of(queries.begin(), queries.end(), [](const QueryRecord& q) { return q.failed; }))
            why += std::string(why.empty() ? "" : " and ") + "some queries failed";
        res.error = why + "; the bundle is partial (see manifest.json)";
    }
    return res;
}

}  // namespace jobtrail::forensics
