#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "loki/client.hpp"
#include "loki/query.hpp"
#include "node/layout.hpp"
#include "node/schema.hpp"

// `jobtrail bundle`: everything jobtrail knows about one job, from Loki (all its nodes, its
// window) or from this node's files, in one .tar.zst with a manifest, a timeline, a summary and
// a report page. Records stream to disk as they arrive: memory does not grow with the job.
namespace jobtrail::forensics {

// Documented exit codes of `jobtrail bundle` (and the other commands).
inline constexpr int kExitOk = 0;
inline constexpr int kExitNotFound = 1;  // no record of the job anywhere
inline constexpr int kExitUsage = 2;
inline constexpr int kExitPartial = 3;  // a bundle was written, but some queries failed
inline constexpr int kExitError = 4;    // no bundle (cannot write the output, ...)

struct BundleOptions {
    std::string job_id;
    std::vector<std::string> nodes;  // given: skip discovery of the nodes
    int64_t start_ns = 0, end_ns = 0;
    int64_t margin_ns = 600LL * 1'000'000'000;           // kernel context before and after
    int64_t lookback_ns = 7LL * 86'400 * 1'000'000'000;  // how far back to look for the job
    bool local = false;                                  // this node's files, no Loki
    std::string log_dir = "/var/log/slurm";
    std::string nccl_dir;                    // default <log_dir>/nccl (the plugin's nccl_dir)
    uint64_t max_file_bytes = 256ULL << 20;  // per local file read; the rest is cut, with a marker
    uint64_t max_local_bytes = 1ULL << 30;   // all of a job's local NCCL files together
    size_t max_local_files = 1024;           // NCCL files read locally; the rest are refused, counted
    std::string out_dir = ".";
    // The `cluster` label every query matches; empty: the one cluster whose records hold the
    // job (several are an error that names them). The archive is named after it.
    std::string cluster;
    node::Schema schema;  // the site's `job` values (config::stream_schema)
    loki::Endpoint endpoint;
    int parallel = 4;  // queries in flight at once, at most
    // Loki's query splitting, as hints: fewer queries in flight when each is split into many
    // pieces (split_queries_by_interval) than Loki runs at once (max_query_parallelism).
    int max_query_parallelism = 32;
    int64_t split_interval_ns = 3'600'000'000'000;
    loki::QueryOptions query;
    std::string command_line;
    bool progress = false;                               // lines on stderr as queries finish
    std::string sacct = "sacct", scontrol = "scontrol";  // window from Slurm's accounting, when found
};

struct BundleResult {
    int exit_code = kExitOk;
    std::string archive;  // path of the .tar.zst
    std::string summary;  // summary.txt's text
    std::string error;
};

BundleResult make_bundle(const BundleOptions& opts);

// A value from Loki or from a user's directory (node, NCCL file, cluster) as one file name in
// the bundle: [A-Za-z0-9._-] kept, any other byte and a leading '.' as %XX, so the result is
// never "", ".", ".." or has a '/', and distinct values stay distinct. Longer than 128 bytes:
// cut, with '~' and a hash of the whole value. "" is "~empty".
std::string path_component(std::string_view value);

// SHA-256 of a file as lowercase hex; empty if it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace jobtrail::forensics
