#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "node/schema.hpp"
#include "shipper/sources/kind.hpp"

namespace jobtrail::shipper {

// How a file's lines are read (`format:`): as they are; jobtrail's job logs (their own stamp and
// tag); NCCL debug files (node/nccl_file.hpp's stamp, the step and file said once); kubelet's CRI
// container logs (cri.hpp).
enum class LineFormat { kPlain, kJoblog, kNccl, kCri };

// One entry of shipper.sources.files: a set of files shipped as one kind of stream (the Loki
// `job` label).
struct FileSourceConfig {
    std::string name;
    std::vector<std::string> paths;          // globs, {a,b} alternatives allowed
    std::string job;                         // Loki `job` label: slurm-prolog-epilog, nccl, fabric-manager, ...
    LineFormat format = LineFormat::kPlain;  // plain | joblog | nccl | cri
    std::vector<std::pair<std::string, std::string>> labels;  // extra static labels
    // What kind of stream these files are (`stream:`; default from the format): stages and the
    // CLI find "the NCCL stream" by kind, whatever `job` the site calls it.
    node::StreamKind stream = node::StreamKind::kOther;
    // Bounds against a job's user with ten thousand files: files tracked by this source, and in
    // any one directory (a job's NCCL directory). Files past them are refused and counted.
    size_t max_files = 4096;
    size_t max_files_per_dir = 512;
    // One user's share of max_files, so that their old job directories cannot take the source's
    // every slot. Root's files are exempt: no user can make one.
    size_t max_files_per_owner = 1024;
    // Descriptors held: a file not grown for idle_close is closed (its position kept) and opened
    // again when its size changes; past max_open_files the least recently grown are closed.
    size_t max_open_files = 256;
    int64_t idle_close_ms = 60'000;
    // A file not grown for release_after (a finished job's: tmpfiles keeps NCCL files 30 days) is
    // released: it no longer counts against max_files or its owner's share, and is known by its
    // size and mtime; when it grows it is tracked again from its checkpoint. Each owner's
    // released files are at most max_files_per_owner (root's max_files).
    int64_t release_after_ms = 600'000;
    // Bytes of unterminated lines held for all files together; past it the longest are cut and
    // shipped as lines (their rest follows as new lines), so a user's growing lines cost bounded memory.
    uint64_t max_partial_bytes = 8ULL << 20;
};

// max_files, max_open_files, idle_close, release_after and max_partial_bytes of a section (a file source's, or
// another kind's built on it: pods/), into `fs`.
void parse_file_bounds(config::Parser& p, const YAML::Node& n, const std::string& where, FileSourceConfig& fs);

struct FileKind {
    static constexpr const char* kName = "files";
    using Config = std::vector<FileSourceConfig>;
    // The job logs, the NCCL files and the fabric manager log.
    static Config defaults();
    static void parse(config::Parser& p, const YAML::Node& sources, const std::string& where, Config& out);
    // The `job` value of each kind of stream a file source is (`stream:`, or from its format).
    static void schema(const Config& c, node::Schema& s);
    static void build(const SourceContext& ctx, const Config& c, Sources& out);
    static void declare_metrics(metrics::Registry& m);
};

}  // namespace jobtrail::shipper
