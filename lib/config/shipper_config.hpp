#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "config/sources.hpp"
#include "loki/endpoint.hpp"
#include "node/schema.hpp"

namespace jobtrail::config {

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
    // Each stream's pushes paced at this (bytes/s; 0: unpaced) and cut to a quarter of it, so
    // Loki never shards it: under shard_streams (on by default, desired_rate 1536KB) a stream
    // above the rate is split over __stream_shard__ streams taken round robin, and an entry sent
    // again after a lost answer lands in another shard and is kept twice.
    uint64_t max_stream_rate = 512ULL << 10;
    int64_t min_backoff_ms = 500;
    int64_t max_backoff_ms = 300'000;
    int64_t max_age_ms = 7LL * 86'400'000;          // Loki's reject_old_samples_max_age
    uint64_t max_line_bytes = 256ULL << 10;         // Loki's max_line_size
    std::string metrics_listen = "127.0.0.1:9480";  // IPv4 host:port; empty: no endpoint
    int64_t heartbeat_ms = 300'000;                 // {job="jobtrail-shipper"} heartbeat; 0: none
    // Sources: shipper.sources.<kind>, each parsed by its kind (config/sources.hpp), and the
    // `job` value of each kind of stream they make, resolved once when the config is parsed.
    SourceValues sources;
    node::Schema schema;
    // Stages
    std::vector<DropRule> drop;
    bool drop_blank = true;
    bool nccl_noise = true;  // drop NCCL INFO Net/Channel/Comm lines of jobs without trace capture
    // NCCL line bytes one job may ship from this node per window; past it its lines are dropped,
    // counted, and said in one line of its stream per window. 0 bytes: no budget.
    uint64_t nccl_budget_bytes = 24ULL << 20;
    int64_t nccl_budget_window_ms = 60'000;
};

ShipperConfig default_shipper_config();
// shipper.loki, for the shipper and the CLI alike.
loki::Endpoint loki_endpoint(const ShipperConfig& c);

// The `job` value of each kind of stream, the sources' overrides applied (ShipperConfig::schema).
node::Schema stream_schema(const ShipperConfig& c);

}  // namespace jobtrail::config
