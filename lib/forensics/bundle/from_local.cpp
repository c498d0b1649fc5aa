// A bundle's records from this node's files: its job logs (with the kernel records the
// collectors kept in them) and the job's NCCL files, each read with a bound.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "common/fs.hpp"
#include "common/text.hpp"
#include "common/time.hpp"
#include "forensics/bundle/bounded_lines.hpp"
#include "forensics/bundle/collection.hpp"
#include "joblog/format.hpp"
#include "joblog/kernel_line.hpp"
#include "joblog/shipped.hpp"
#include "node/nccl_file.hpp"

namespace jobtrail::forensics::bundle {
namespace {

namespace fs = std::filesystem;

std::string short_hostname() {
    char h[256] = {};
    ::gethostname(h, sizeof h - 1);
    std::string s(h);
    return s.substr(0, s.find('.'));
}

// The job's prolog and epilog logs; the kernel records are the ones the collectors kept in them
// (before the job: kmsg-context, during it: kmsg). `node` becomes what their headers say.
std::vector<QueryRecord> from_job_logs(Collection& col, Window& w, std::string& node) {
    const BundleOptions& o = col.options();
    std::vector<QueryRecord> out;
    for (const std::string phase : {"prolog", "epilog"}) {
        const std::string path = o.log_dir + "/" + phase + "/" + o.job_id + ".log";
        QueryRecord r{"local " + phase, path};
        SafeFile f = open_read_safe(path);
        if (!f.fd.valid()) {
            r.failed = f.refused != Refusal::kMissing;
            r.error = r.failed ? escape_line(f.error) : "no such file";
            if (r.failed) col.refuse(path, f);
            out.push_back(r);
            continue;
        }
        BoundedLines in(f.fd.get(), o.max_file_bytes);
        std::string raw;
        while (in.next(raw)) {
            joblog::Line l;
            if (!joblog::parse_line(raw, l)) continue;
            ++r.lines;
            if (l.tag == joblog::kMeta && starts_with(l.text, "node=")) node = std::string(l.text.substr(5));
            std::optional<joblog::KernelLine> kernel;
            if (joblog::is_kernel_tag(l.tag)) {
                kernel = joblog::decode_kernel_line(l.text, l.ts_ns);
                l.ts_ns = kernel->ts_ns;
            }
            if (!w.start_ns || l.ts_ns < w.start_ns) w.start_ns = l.ts_ns;
            w.end_ns = std::max(w.end_ns, l.ts_ns);
            if (kernel) {
                if (!kernel->record) continue;
                const kmsg::Record& rec = *kernel->record;
                const std::string rel = "nodes/" + path_component(node) + "/kmsg.log";
                // A user process's write to /dev/kmsg is kept for the reader, never analysed.
                // The prolog's kernel context is from before the job.
                if (rec.facility == 0)
                    col.record(path_component(node), "kmsg", rel, l.ts_ns, rec.message,
                               l.tag == joblog::kKmsgContext ? -1 : 0);
                else
                    col.stage(rel, l.ts_ns, rec.message);
                continue;
            }
            if (l.tag == joblog::kKmsgDict) continue;
            col.record(path_component(node), phase, "nodes/" + path_component(node) + "/" + phase + ".log", l.ts_ns,
                       joblog::make_shipped_line(phase, l.tag, l.name, l.text));
        }
        r.truncated = in.cut();
        out.push_back(r);
    }
    return out;
}

// The job's NCCL files: the user decides how many files and how many bytes there are, the bundle
// takes a bounded share of them and says what it left.
QueryRecord from_nccl_files(Collection& col, const Window& w, const std::string& node) {
    const BundleOptions& o = col.options();
    const std::string nccl_dir = (o.nccl_dir.empty() ? o.log_dir + "/nccl" : o.nccl_dir) + "/" + o.job_id;
    QueryRecord nr{"local NCCL", nccl_dir + "/*.log"};
    std::error_code ec;
    std::vector<std::pair<std::string, bool>> names;  // (name, is a directory)
    if (fs::is_symlink(fs::symlink_status(nccl_dir, ec))) {
        SafeFile f;
        f.refused = Refusal::kSymlink;
        f.error = nccl_dir + ": the job's NCCL directory is a symbolic link";
        col.refuse(nccl_dir, f);
    } else {
        for (const auto& e : fs::directory_iterator(nccl_dir, ec))
            names.emplace_back(e.path().filename().string(), e.symlink_status(ec).type() == fs::file_type::directory);
    }
    std::sort(names.begin(), names.end());
    size_t files_read = 0;
    uint64_t bytes_read = 0;
    for (const auto& [name, is_dir] : names) {
        const std::string path = nccl_dir + "/" + name;
        SafeFile f;
        if (files_read >= o.max_local_files || bytes_read >= o.max_local_bytes) {
            f.refused = Refusal::kTooMany;
            f.error = path + ": past the bundle's limit of " + std::to_string(o.max_local_files) + " files or " +
                      std::to_string(o.max_local_bytes) + " bytes of NCCL output";
            nr.truncated = true;
            col.refuse(name, f);
            continue;
        }
        if (is_dir) {
            f.refused = Refusal::kNotRegular;
            f.error = path + ": is a directory (not followed)";
        } else {
            f = open_read_safe(path);
        }
        if (!f.fd.valid()) {
            if (f.refused != Refusal::kMissing) col.refuse(name, f);
            continue;
        }
        const std::string rel = "nccl/" + path_component(node) + "/" + path_component(name);
        ++files_read;
        BoundedLines in(f.fd.get(), std::min(o.max_file_bytes, o.max_local_bytes - bytes_read));
        std::string raw;
        // A line without the plugin's stamp (a user's own print, a continuation) takes the time
        // of the line before it, so that it stays beside it in the timeline.
        int64_t last = w.start_ns;
        Rfc3339Parser stamps;
        while (in.next(raw)) {
            if (const auto t = node::NcclLine(raw).time(stamps)) last = *t;
            ++nr.lines;
            col.record(path_component(node), "nccl", rel, last, raw);
        }
        bytes_read += in.consumed();
        if (in.cut()) {
            nr.truncated = true;
            col.record(path_component(node), "nccl", rel, last,
                       "[jobtrail] cut here: the file is longer than " +
                           std::to_string(std::min(o.max_file_bytes, in.consumed())) + " bytes");
        }
    }
    return nr;
}

}  // namespace

Gathered gather_local(const BundleOptions& o, Collection& col) {
    Gathered g;
    Window& w = g.window;
    w.nodes = o.nodes;
    w.start_ns = o.start_ns;
    w.end_ns = o.end_ns;
    std::string node = short_hostname();
    g.queries = from_job_logs(col, w, node);
    g.queries.push_back(from_nccl_files(col, w, node));
    if (w.nodes.empty()) w.nodes = {node};
    w.basis = "local job logs";
    w.start_ns -= o.margin_ns;  // the window the records came from, as in the Loki case
    w.end_ns += o.margin_ns;
    g.source = "local " + o.log_dir;
    return g;
}

}  // namespace jobtrail::forensics::bundle
