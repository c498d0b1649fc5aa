#include "forensics/bundle.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <set>
#include <thread>

#include "common/fs.hpp"
#include "common/text.hpp"
#include "common/time.hpp"
#include "forensics/analysis.hpp"
#include "forensics/logql.hpp"
#include "forensics/report.hpp"
#include "joblog/format.hpp"
#include "jobtrail/version.hpp"
#include "kmsg/record.hpp"
#include "process/runner.hpp"

namespace jobtrail::forensics {
namespace fs = std::filesystem;
namespace {

std::string file_safe(std::string_view s) {
    std::string out;
    for (const char c : s)
        out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
    return out.empty() || out[0] == '.' ? "_" + out : out;
}

std::string short_hostname() {
    char h[256] = {};
    ::gethostname(h, sizeof h - 1);
    std::string s(h);
    return s.substr(0, s.find('.'));
}

// Files a bundle is being written into, below the staging directory; each source writes its
// own files, "<rfc3339> <line>" per record, in time order.
class Staging {
public:
    explicit Staging(std::string dir) : dir_(std::move(dir)) {}
    void write(const std::string& rel, int64_t ts, std::string_view line) {
        std::lock_guard<std::mutex> lk(mu_);
        auto it = open_.find(rel);
        if (it == open_.end()) {
            if (open_.size() >= 128) open_.clear();  // bounded file handles; reopened in append mode
            fs::create_directories(fs::path(dir_ + "/" + rel).parent_path());
            it = open_.emplace(rel, std::make_unique<std::ofstream>(dir_ + "/" + rel, std::ios::app)).first;
            files_.insert(rel);
        }
        *it->second << format_rfc3339_ns(ts) << ' ' << line << '\n';
    }
    void close() {
        std::lock_guard<std::mutex> lk(mu_);
        open_.clear();
    }
    const std::set<std::string>& files() const { return files_; }
    const std::string& dir() const { return dir_; }

private:
    std::string dir_;
    std::mutex mu_;
    std::map<std::string, std::unique_ptr<std::ofstream>> open_;
    std::set<std::string> files_;
};

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
void write_timeline(const Staging& st, const std::string& out_path) {
    struct Cursor {
        std::ifstream in;
        std::string line, node, source;
    };
    std::vector<std::unique_ptr<Cursor>> cs;
    for (const auto& rel : st.files()) {
        auto c = std::make_unique<Cursor>();
        c->in.open(st.dir() + "/" + rel);
        c->node = node_of(rel);
        c->source = source_of(rel);
        if (std::getline(c->in, c->line)) cs.push_back(std::move(c));
    }
    auto later = [&](size_t a, size_t b) {
        // RFC 3339 with nine digits, all UTC: text order is time order.
        return cs[a]->line.compare(0, 30, cs[b]->line, 0, 30) > 0;
    };
    std::priority_queue<size_t, std::vector<size_t>, decltype(later)> heap(later);
    for (size_t i = 0; i < cs.size(); ++i) heap.push(i);
    std::ofstream out(out_path);
    while (!heap.empty()) {
        const size_t i = heap.top();
        heap.pop();
        Cursor& c = *cs[i];
        const size_t sp = c.line.find(' ');
        out << c.line.substr(0, sp) << ' ' << c.node << ' ' << c.source << ' '
            << (sp == std::string::npos ? "" : c.line.substr(sp + 1)) << '\n';
        if (std::getline(c.in, c.line)) heap.push(i);
    }
}

bool write_archive(const std::string& staging, const std::string& top, const std::vector<std::string>& files,
                   const std::string& path, std::string& err) {
    struct archive* a = archive_write_new();
    archive_write_add_filter_zstd(a);
    archive_write_set_format_pax_restricted(a);
    if (archive_write_open_filename(a, path.c_str()) != ARCHIVE_OK) {
        err = std::string("cannot write ") + path + ": " + archive_error_string(a);
        archive_write_free(a);
        return false;
    }
    const time_t now = ::time(nullptr);
    for (const auto& rel : files) {
        const std::string full = staging + "/" + rel;
        struct stat sb {};
        if (::stat(full.c_str(), &sb) != 0) continue;
        struct archive_entry* e = archive_entry_new();
        archive_entry_set_pathname(e, (top + "/" + rel).c_str());
        archive_entry_set_size(e, sb.st_size);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_mtime(e, now, 0);
        archive_write_header(a, e);
        std::ifstream in(full, std::ios::binary);
        char buf[65536];
        while (in) {
            in.read(buf, sizeof buf);
            if (in.gcount() > 0) archive_write_data(a, buf, static_cast<size_t>(in.gcount()));
        }
        archive_entry_free(e);
    }
    const bool ok = archive_write_close(a) == ARCHIVE_OK;
    if (!ok) err = std::string("archive: ") + archive_error_string(a);
    archive_write_free(a);
    return ok;
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
                std::string_view line) {
        st_.write(rel, ts, line);
        std::lock_guard<std::mutex> lk(an_mu_);
        an_.add(node, source, ts, line);
    }

    QueryRecord run_query(const std::string& name, const std::string& logql, int64_t start, int64_t end,
                          const std::function<void(const loki::QueryEntry&)>& sink) {
        QueryRecord r{name, logql};
        const int64_t t0 = monotonic_ns();
        loki::Client client(o_.endpoint);
        std::string err;
        client.load_secrets(err);
        // Long windows go in one-day pieces: Loki refuses queries longer than max_query_length.
        constexpr int64_t kDay = 86'400LL * 1'000'000'000;
        for (int64_t from = start; from < end && !r.failed; from += kDay) {
            const auto res = loki::query_range(client, logql, from, std::min(end, from + kDay), o_.query, sink);
            r.lines += res.entries;
            r.truncated |= res.truncated;
            if (res.failed) {
                r.failed = true;
                r.error = res.error;
            }
        }
        r.seconds = static_cast<double>(monotonic_ns() - t0) / 1e9;
        return r;
    }

    std::vector<QueryRecord> from_loki(const Window& w) {
        struct Task {
            std::string name, logql;
            std::function<void(const loki::QueryEntry&)> sink;
        };
        std::vector<Task> tasks;
        auto label = [](const loki::QueryEntry& e, const char* k) {
            auto it = e.labels->find(k);
            return it == e.labels->end() ? std::string() : it->second;
        };
        tasks.push_back(
            {"prolog and epilog", prolog_epilog_query(o_.schema, o_.job_id), [this, label](const loki::QueryEntry& e) {
                 const std::string node = file_safe(label(e, "node"));
                 std::string phase = label(e, "phase");
                 if (phase.empty()) phase = starts_with(e.line, "epilog") ? "epilog" : "prolog";
                 record(node, phase, "nodes/" + node + "/" + phase + ".log", e.ts_ns, e.line);
             }});
        for (const auto& n : w.nodes) {
            const std::string node = file_safe(n);
            // One NCCL query per node: bounded queries that run in parallel.
            tasks.push_back(
                {"NCCL " + n, nccl_query(o_.schema, o_.job_id, n), [this, node, label](const loki::QueryEntry& e) {
                     std::string file = label(e, "file");
                     if (file.empty()) file = "nccl.log";
                     record(node, "nccl", "nccl/" + node + "/" + file_safe(file), e.ts_ns, e.line);
                 }});
            tasks.push_back({"kernel " + n, kernel_query(o_.schema, n), [this, node](const loki::QueryEntry& e) {
                                 record(node, "kmsg", "nodes/" + node + "/kmsg.log", e.ts_ns, e.line);
                             }});
            tasks.push_back(
                {"slurmd " + n, slurmd_query(o_.schema, n, o_.job_id), [this, node](const loki::QueryEntry& e) {
                     record(node, "slurmd", "nodes/" + node + "/slurmd.log", e.ts_ns, e.line);
                 }});
            tasks.push_back(
                {"fabric manager " + n, fabric_manager_query(o_.schema, n), [this, node](const loki::QueryEntry& e) {
                     record(node, "fabric-manager", "nodes/" + node + "/fabric-manager.log", e.ts_ns, e.line);
                 }});
        }
        std::vector<QueryRecord> done(tasks.size());
        std::atomic<size_t> next{0}, finished{0};
        std::vector<std::thread> pool;
        for (int t = 0; t < std::max(1, o_.parallel); ++t) {
            pool.emplace_back([&] {
                for (size_t i; (i = next++) < tasks.size();) {
                    done[i] = run_query(tasks[i].name, tasks[i].logql, w.start_ns, w.end_ns, tasks[i].sink);
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
            std::ifstream in(path);
            if (!in) {
                r.failed = !fs::exists(path) ? false : true;
                r.error = fs::exists(path) ? "cannot read" : "no such file";
                out.push_back(r);
                continue;
            }
            std::string raw;
            while (std::getline(in, raw)) {
                joblog::Line l;
                if (!joblog::parse_line(raw, l)) continue;
                ++r.lines;
                if (l.tag == joblog::kMeta && starts_with(l.text, "node=")) node = std::string(l.text.substr(5));
                if (!w.start_ns || l.ts_ns < w.start_ns) w.start_ns = l.ts_ns;
                w.end_ns = std::max(w.end_ns, l.ts_ns);
                if (l.tag == joblog::kKmsg || l.tag == joblog::kKmsgContext) {
                    kmsg::Record rec;
                    kmsg::ParseError perr;
                    if (!kmsg::parse_record(unescape_hex(l.text), rec, perr)) continue;
                    const std::string rel = "nodes/" + file_safe(node) + "/kmsg.log";
                    // A user process's write to /dev/kmsg is kept for the reader, never analysed.
                    if (rec.facility == 0)
                        record(file_safe(node), "kmsg", rel, l.ts_ns, escape_line(rec.message));
                    else
                        st_.write(rel, l.ts_ns, escape_line(rec.message));
                    continue;
                }
                if (l.tag == joblog::kKmsgDict) continue;
                const std::string line = phase + " " + std::string(l.tag) +
                                         (l.name.empty() ? "" : "[" + std::string(l.name) + "]") + " " +
                                         std::string(l.text);
                record(file_safe(node), phase, "nodes/" + file_safe(node) + "/" + phase + ".log", l.ts_ns, line);
            }
            out.push_back(r);
        }
        const std::string nccl_dir = (o_.nccl_dir.empty() ? o_.log_dir + "/nccl" : o_.nccl_dir) + "/" + o_.job_id;
        QueryRecord nr{"local NCCL", nccl_dir + "/*.log"};
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(nccl_dir, ec)) {
            std::ifstream in(e.path());
            std::string raw;
            int64_t last = w.start_ns;
            while (std::getline(in, raw)) {
                if (raw.size() > 2 && raw[0] == '[') {
                    const size_t close = raw.find(']');
                    if (close != std::string::npos)
                        if (auto t = parse_rfc3339_ns(std::string_view(raw).substr(1, close - 1))) last = *t;
                }
                ++nr.lines;
                record(file_safe(node), "nccl",
                       "nccl/" + file_safe(node) + "/" + file_safe(e.path().filename().string()), last,
                       escape_line(raw));
            }
        }
        out.push_back(nr);
        node_out = node;
        return out;
    }

private:
    const BundleOptions& o_;
    Staging& st_;
    Analyzer& an_;
    std::mutex an_mu_;
};

std::string utc_stamp(int64_t ns) {
    std::string s = format_rfc3339_ns(ns);  // 2026-11-29T21:52:22.146801327Z
    return s.substr(0, 4) + s.substr(5, 2) + s.substr(8, 2) + "T" + s.substr(11, 2) + s.substr(14, 2) +
           s.substr(17, 2) + "Z";
}

}  // namespace

std::string sha256_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return "";
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
    char buf[65536];
    while (in) {
        in.read(buf, sizeof buf);
        if (in.gcount() > 0) EVP_DigestUpdate(ctx.get(), buf, static_cast<size_t>(in.gcount()));
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

BundleResult make_bundle(const BundleOptions& o) {
    BundleResult res;
    const int64_t started = realtime_ns();
    const std::string staging =
        o.out_dir + "/.jobtrail-job" + file_safe(o.job_id) + "-" + std::to_string(::getpid()) + ".partial";
    std::error_code ec;
    fs::create_directories(staging, ec);
    if (ec) {
        res.exit_code = kExitError;
        res.error = "cannot create " + staging + ": " + ec.message();
        return res;
    }
    Staging st(staging);
    Analyzer an;
    Collection col(o, st, an);
    Window w;
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
        loki::Client probe(o.endpoint);
        source = probe.describe();
        if (w.nodes.empty() || !w.start_ns) {
            // Where and when: the collectors' records in Loki, else Slurm's accounting.
            Window found;
            std::set<std::string> nodes;
            std::string cluster_label;
            loki::Client client(o.endpoint);
            std::string err;
            client.load_secrets(err);
            const int64_t now = realtime_ns();
            QueryRecord q{"find the job", prolog_epilog_query(o.schema, o.job_id)};
            const auto r = loki::query_range(client, q.logql, now - o.lookback_ns, now + 60'000'000'000, o.query,
                                             [&](const loki::QueryEntry& e) {
                                                 if (auto it = e.labels->find("node"); it != e.labels->end())
                                                     nodes.insert(it->second);
                                                 if (auto it = e.labels->find("cluster"); it != e.labels->end())
                                                     cluster_label = it->second;
                                                 if (!found.start_ns || e.ts_ns < found.start_ns)
                                                     found.start_ns = e.ts_ns;
                                                 found.end_ns = std::max(found.end_ns, e.ts_ns);
                                             });
            q.lines = r.entries;
            q.failed = r.failed;
            q.error = r.error;
            queries.push_back(q);
            if (!nodes.empty()) {
                found.nodes.assign(nodes.begin(), nodes.end());
                found.basis = "prolog/epilog records in Loki";
            } else if (!window_from_slurm(o, found)) {
                found = {};
            }
            if (w.nodes.empty()) w.nodes = found.nodes;
            if (!w.start_ns) {
                w.start_ns = found.start_ns;
                w.end_ns = found.end_ns;
            }
            w.basis = found.basis.empty() ? "options" : found.basis;
            if (!cluster_label.empty()) an.facts().cluster = cluster_label;
            if (w.nodes.empty() || !w.start_ns) {
                fs::remove_all(staging, ec);
                res.exit_code = r.failed ? kExitPartial : kExitNotFound;
                res.error = r.failed ? "cannot reach Loki to find job " + o.job_id + ": " + r.error
                                     : "job " + o.job_id + ": no prolog/epilog records in Loki over the last " +
                                           std::to_string(o.lookback_ns / 3'600'000'000'000) +
                                           " h and no accounting record; give --nodes, --start and --end";
                return res;
            }
        } else {
            w.basis = "options";
        }
        if (!w.end_ns) w.end_ns = realtime_ns();
        w.start_ns -= o.margin_ns;
        w.end_ns += o.margin_ns;
        auto got = col.from_loki(w);
        queries.insert(queries.end(), got.begin(), got.end());
    }
    st.close();
    if (o.local && st.files().empty()) {
        fs::remove_all(staging, ec);
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
    const std::string top = file_safe(facts.cluster) + "-job" + file_safe(o.job_id) + "-" + utc_stamp(started);
    write_timeline(st, staging + "/timeline.txt");
    res.summary = an.summary_text();
    write_file_atomic(staging + "/summary.txt", res.summary, 0644);
    const auto findings = an.findings();
    write_file_atomic(staging + "/report.html", render_report_html(facts, findings, an.likely_cause(findings)), 0644);

    bool partial = false;
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
    std::vector<std::string> files(st.files().begin(), st.files().end());
    files.insert(files.begin(), {"summary.txt", "timeline.txt", "report.html"});
    nlohmann::ordered_json mf = nlohmann::ordered_json::array();
    for (const auto& f : files) {
        struct stat sb {};
        ::stat((staging + "/" + f).c_str(), &sb);
        mf.push_back({{"path", f}, {"bytes", sb.st_size}, {"sha256", sha256_file(staging + "/" + f)}});
    }
    const nlohmann::ordered_json manifest = {{"jobtrail_version", kVersion},
                                             {"command", o.command_line},
                                             {"created", format_rfc3339_ns(started)},
                                             {"source", source},
                                             {"job", {{"id", o.job_id}, {"nodes", w.nodes}, {"basis", w.basis}}},
                                             {"window",
                                              {{"start", format_rfc3339_ns(w.start_ns)},
                                               {"end", format_rfc3339_ns(w.end_ns)},
                                               {"margin_s", o.margin_ns / 1'000'000'000}}},
                                             {"queries", mq},
                                             {"complete", !partial},
                                             {"files", mf}};
    write_file_atomic(staging + "/manifest.json", manifest.dump(2) + "\n", 0644);
    files.insert(files.begin(), "manifest.json");

    res.archive = o.out_dir + "/" + top + ".tar.zst";
    std::string err;
    if (!write_archive(staging, top, files, res.archive, err)) {
        fs::remove_all(staging, ec);
        res.exit_code = kExitError;
        res.error = err;
        return res;
    }
    fs::remove_all(staging, ec);
    write_file_atomic(res.archive + ".sha256", sha256_file(res.archive) + "  " + top + ".tar.zst\n", 0644);
    res.exit_code = partial ? kExitPartial : kExitOk;
    if (partial) res.error = "some queries failed; the bundle is partial (see manifest.json)";
    return res;
}

}  // namespace jobtrail::forensics
