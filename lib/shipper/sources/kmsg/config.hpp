#pragma once

#include "shipper/sources/kind.hpp"

namespace jobtrail::shipper {

// shipper.sources.kmsg: true or false. The device is collector.kmsg (the collectors read it too).
struct KmsgConfig {
    bool enabled = true;
};

struct KmsgKind {
    static constexpr const char* kName = "kmsg";
    using Config = KmsgConfig;
    static Config defaults() { return {}; }
    static void parse(config::Parser& p, const YAML::Node& sources, const std::string& where, Config& out);
    static void schema(const Config&, node::Schema&) {}  // {job="kmsg"}: not configurable
    static void build(const SourceContext& ctx, const Config& c, Sources& out);
    static void declare_metrics(metrics::Registry& m);
};

}  // namespace jobtrail::shipper
