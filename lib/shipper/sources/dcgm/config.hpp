#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dcgm/client.hpp"
#include "shipper/sources/kind.hpp"

namespace jobtrail::shipper {

// shipper.sources.dcgm: NVIDIA DCGM's policy violations and health incidents, one line each in
// {job=<job>}, from the node's nv-hostengine through libdcgm loaded at run time (off by default:
// most sites run no host engine).
struct DcgmConfig {
    bool enabled = false;
    dcgm::ClientOptions client;           // address, libraries, call_timeout_ms
    int64_t health_interval_ms = 30'000;  // DCGM's health checks, this often
    int queue_size =
        4096;  // violations waiting for the pipeline (at most 65536: ~16 MiB); past it, dropped and counted
    std::string job = "dcgm";  // the Loki `job` label of the stream
};

struct DcgmKind {
    static constexpr const char* kName = "dcgm";
    using Config = DcgmConfig;
    static Config defaults() { return {}; }
    static void parse(config::Parser& p, const YAML::Node& sources, const std::string& where, Config& out);
    static void schema(const Config& c, node::Schema& s) { s.set_job(node::StreamKind::kDcgm, c.job); }
    static void build(const SourceContext& ctx, const Config& c, Sources& out);
    static void declare_metrics(metrics::Registry& m);
};

}  // namespace jobtrail::shipper
