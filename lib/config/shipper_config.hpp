#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "loki/endpoint.hpp"
#include "node/schema.hpp"

namespace jobtrail::config {

// A set of files shipped as one kind of stream (the Loki `job` label).
struct FileSourceConfig {
    std::string name;
    std::vector<std::string> paths;  // globs, {a,b} alternatives allowed
    std::string job;                 // Loki `job` label: slurm-prolog-epilog, nccl, fabric-manager, ...
    std::string format = "plain";    // plain | joblog (jobtrail's job logs) | nccl | cri
    std::vector<std::pair<std::string, std::string>> labels;  // extra static labels
    // What kind of stream these files are (`stream:`; default from the format): stages and the
    // CLI find "the NCCL stream" by kind, whatever `job` the site calls it.
    node::Stream stream = node::Stream::kOther;
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
    // Bytes of unterminated lines held for all files together; past it the longest are cut and
    // shipped as lines (their rest follows as new lines), so a user's growing lines cost bounded memory.
    uint64_t max_partial_bytes = 8ULL << 20;
};

// The systemd journal (slurmd, fabric manager, ...): one stream per unit and priority.
struct JournaldConfig {
    bool enabled = true;                  // ignored, with a warning, by a build without libsystemd
    std::vector<std::string> units;       // _SYSTEMD_UNIT values; empty: every unit (the config refuses [])
    std::string directory;                // journal files from here instead of the system journal
    int64_t since_ms = 12LL * 3'600'000;  // first start, no cursor yet: how far back to begin
};

struct DropRule {
    std::string name;     // reason, counted in metrics
    std::string pattern;  // RE2, matched against the line
};

struct ShipperConfig {
    // Loki
    std::string loki_url;  // empty: no Loki (the shipper only spools; --dry-run prints)
    std::string tenant;
    std::string basic_user, basic_password_file, bearer_token_file;
    std::string ca_file, cert_file, key_file;
    bool tls_verify = true;
    int64_t timeout_ms = 10'000;
    bool structured_metadata = true;  // Loki 3 takes it; set false for older Loki
    // Spool and sending
    std::string spool_dir;  // default: <collector.state_dir>/spool
    uint64_t spool_max_bytes = 1ULL << 30;
    bool spool_fsync = true;  // false: what was read but not sent is lost in a crash (benchmarks)
    uint64_t batch_max_bytes = 1ULL << 20;
    int64_t batch_wait_ms = 1'000;
    size_t max_in_flight = 4;  // push requests at once per spool lane, each for another stream
    int64_t min_backoff_ms = 500;
    int64_t max_backoff_ms = 300'000;
    int64_t max_age_ms = 7LL * 86'400'000;          // Loki's reject_old_samples_max_age
    uint64_t max_line_bytes = 256ULL << 10;         // Loki's max_line_size
    std::string metrics_listen = "127.0.0.1:9480";  // IPv4 host:port; empty: no endpoint
    int64_t heartbeat_ms = 300'000;                 // {job="jobtrail-shipper"} heartbeat; 0: none
    // Sources
    bool kmsg = true;
    std::vector<FileSourceConfig> files;
    JournaldConfig journald;
    // Stages
    std::vector<DropRule> drop;
    bool drop_blank = true;
    bool nccl_noise = true;  // drop NCCL INFO Net/Channel/Comm lines of jobs without trace capture
    // NCCL line bytes one job may ship from this node per window; past it its lines are dropped,
    // counted, and said in one line of its stream per window. 0 bytes: no budget.
    uint64_t nccl_budget_bytes = 64ULL << 20;
    int64_t nccl_budget_window_ms = 60'000;
};

ShipperConfig default_shipper_config();
// shipper.loki, for the shipper and the CLI alike.
loki::Endpoint loki_endpoint(const ShipperConfig& c);

// The `job` value of each kind of stream, the file sources' overrides applied.
node::Schema stream_schema(const ShipperConfig& c);

}  // namespace jobtrail::config
