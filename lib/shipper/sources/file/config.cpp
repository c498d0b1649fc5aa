#include "shipper/sources/file/config.hpp"

#include <algorithm>
#include <iterator>

#include "config/yaml_parser.hpp"
#include "loki/label_name.hpp"
#include "node/layout.hpp"

namespace jobtrail::shipper {

using config::kDay;
using config::kGiB;
using config::kKiB;
using config::kSec;

namespace {

// `format:` values, and the kind of stream each is unless `stream:` says otherwise.
struct FormatName {
    const char* name;
    LineFormat format;
    node::StreamKind stream;
};
constexpr FormatName kFormats[] = {{"plain", LineFormat::kPlain, node::StreamKind::kOther},
                                   {"joblog", LineFormat::kJoblog, node::StreamKind::kJobLog},
                                   {"nccl", LineFormat::kNccl, node::StreamKind::kNccl},
                                   {"cri", LineFormat::kCri, node::StreamKind::kOther}};

// The labels every stream gets from jobtrail: a source's `labels` may not replace them, or its
// lines would pose as another node's, job's or stream kind.
bool reserved_label(const std::string& s) {
    namespace l = node::label;
    for (const char* r : {l::kCluster, l::kNode, l::kJob, l::kJobId, l::kServiceName})
        if (s == r) return true;
    return false;
}

}  // namespace

std::vector<FileSourceConfig> FileKind::defaults() {
    const node::Layout layout;
    const node::Schema schema;
    using node::StreamKind;
    return {
        {"prolog-epilog",
         {layout.job_logs_glob()},
         schema.job(StreamKind::kJobLog),
         LineFormat::kJoblog,
         {},
         StreamKind::kJobLog},
        {"nccl", {layout.nccl_files_glob()}, schema.job(StreamKind::kNccl), LineFormat::kNccl, {}, StreamKind::kNccl},
        {"fabric-manager",
         {"/var/log/fabricmanager.log"},
         schema.job(StreamKind::kFabricManager),
         LineFormat::kPlain,
         {},
         StreamKind::kFabricManager},
        // DCGM's host engine's own account (start, connects, errors); its events are the dcgm
        // source's. Its --log-filename default; nothing to read where DCGM is not installed.
        {"nv-hostengine", {"/var/log/nv-hostengine.log"}, "nv-hostengine", LineFormat::kPlain, {}, StreamKind::kOther}};
}

void FileKind::schema(const Config& c, node::Schema& s) {
    for (const auto& f : c)
        if (f.stream != node::StreamKind::kOther) s.set_job(f.stream, f.job);
}

void parse_file_bounds(config::Parser& p, const YAML::Node& n, const std::string& where, FileSourceConfig& fs) {
    int max_files = static_cast<int>(fs.max_files), open = static_cast<int>(fs.max_open_files);
    p.integer(n, where, "max_files", max_files, 1, 1'000'000);
    // Under the unit's LimitNOFILE (65536), with room for the other sources and sockets.
    p.integer(n, where, "max_open_files", open, 1, 16'384);
    fs.max_files = static_cast<size_t>(max_files);
    fs.max_open_files = static_cast<size_t>(open);
    p.duration(n, where, "idle_close", fs.idle_close_ms, kSec, kDay);
    p.duration(n, where, "release_after", fs.release_after_ms, kSec, 30 * kDay);
    // Below one line's worth lines get cut often; past 1GiB it is no bound under MemoryMax.
    p.size(n, where, "max_partial_bytes", fs.max_partial_bytes, 64 * kKiB, kGiB);
}

void FileKind::parse(config::Parser& p, const YAML::Node& sources, const std::string& where, Config& out) {
    const std::string fw0 = where + "." + kName;
    if (const YAML::Node f = sources[kName]) {
        if (!f.IsSequence()) {
            p.error(f, fw0, "expected a list of file sources");
        } else {
            std::vector<FileSourceConfig> files;
            size_t i = 0;
            for (const auto& item : f) {
                const std::string fw = fw0 + "[" + std::to_string(i++) + "]";
                if (!p.check_map(
                        item, fw,
                        {"name", "paths", "job", "format", "stream", "labels", "max_files", "max_files_per_dir",
                         "max_files_per_owner", "max_open_files", "idle_close", "release_after", "max_partial_bytes"}))
                    continue;
                FileSourceConfig fs;
                p.string(item, fw, "name", fs.name);
                p.string(item, fw, "job", fs.job);
                std::string format = "plain";
                p.string(item, fw, "format", format);
                if (item["paths"]) p.string_list(item["paths"], fw + ".paths", fs.paths);
                int per_dir = static_cast<int>(fs.max_files_per_dir),
                    per_owner = static_cast<int>(fs.max_files_per_owner);
                p.integer(item, fw, "max_files_per_dir", per_dir, 1, 1'000'000);
                p.integer(item, fw, "max_files_per_owner", per_owner, 1, 1'000'000);
                fs.max_files_per_dir = static_cast<size_t>(per_dir);
                fs.max_files_per_owner = static_cast<size_t>(per_owner);
                parse_file_bounds(p, item, fw, fs);
                if (fs.paths.empty()) p.error(item, fw + ".paths", "missing: at least one path or glob");
                if (fs.job.empty()) p.error(item, fw + ".job", "missing: the Loki job label for these files");
                const auto known = std::find_if(std::begin(kFormats), std::end(kFormats),
                                                [&](const FormatName& n) { return format == n.name; });
                if (known == std::end(kFormats)) {
                    p.error(item["format"], fw + ".format", "expected plain, joblog, nccl or cri");
                } else {
                    fs.format = known->format;
                    fs.stream = known->stream;
                }
                if (item["stream"]) {
                    std::string kind;
                    p.string(item, fw, "stream", kind);
                    const auto k = node::parse_stream_kind(kind);
                    if (!k || *k == node::StreamKind::kKernel || *k == node::StreamKind::kJournal ||
                        *k == node::StreamKind::kShipper || *k == node::StreamKind::kPod ||
                        *k == node::StreamKind::kDcgm)
                        p.error(item["stream"], fw + ".stream", "expected job-log, nccl, fabric-manager or other");
                    else
                        fs.stream = *k;
                }
                if (const YAML::Node lb = item["labels"]) {
                    if (!lb.IsMap()) {
                        p.error(lb, fw + ".labels", "expected a mapping of label names to values");
                    } else {
                        for (const auto& kv : lb) {
                            const std::string name = kv.first.as<std::string>("");
                            const std::string lk = fw + ".labels." + name;
                            if (!loki::valid_label_name(name))
                                p.error(kv.first, lk,
                                        "'" + name +
                                            "' is not a Loki label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting "
                                            "with __): Loki would refuse every line of this source");
                            else if (reserved_label(name))
                                p.error(kv.first, lk,
                                        "'" + name +
                                            "' is set by jobtrail on every stream (cluster, node, job, job_id, "
                                            "service_name); the source's job: key names its stream");
                            else if (!kv.second.IsScalar() || kv.second.Scalar().empty())
                                p.error(kv.second, lk, "expected a non-empty string value");
                            else
                                fs.labels.emplace_back(name, kv.second.Scalar());
                        }
                    }
                }
                if (fs.name.empty()) fs.name = fs.job;
                files.push_back(std::move(fs));
            }
            out = std::move(files);
        }
    }
}

}  // namespace jobtrail::shipper
