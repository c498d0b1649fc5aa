#pragma once

#include <yaml-cpp/yaml.h>

#include <any>
#include <concepts>
#include <memory>
#include <string>
#include <vector>

#include "config/shipper_config.hpp"
#include "node/schema.hpp"

namespace jobtrail::config {
class Parser;
}
namespace jobtrail::metrics {
class Registry;
}

// What a kind of source is: a type K in its own folder, sources/<kind>/, and one row in
// registry.hpp's SourceKinds (which checks SourceKind below).
namespace jobtrail::shipper {

class Source;
struct SourceContext;
using Sources = std::vector<std::unique_ptr<Source>>;

template <class K>
concept SourceKind = requires(config::Parser& p, const YAML::Node& sources, const std::string& where,
                              typename K::Config& parsed, const typename K::Config& c, node::Schema& schema,
                              const SourceContext& ctx, Sources& out) {
    // Its section, shipper.sources.<kName>, and what the section holds (<kind>/config.hpp).
    { K::kName } -> std::convertible_to<const char*>;
    // <kind>/config.cpp, no source code, so that the CLI and the collectors link it: the value
    // when the section is absent, the section parsed strictly (file:line:key), the `job` values
    // of the streams it makes.
    { K::defaults() } -> std::same_as<typename K::Config>;
    K::parse(p, sources, where, parsed);
    K::schema(c, schema);
    // Its sources (<kind>/<kind>_source.cpp, the shipper).
    K::build(ctx, c, out);
};

// A kind may have counters of its own: K::declare_metrics(metrics::Registry&), in its
// <kind>_source.cpp, declares them whether or not the kind is configured (registry.cpp).
template <class K>
concept CountingSourceKind = SourceKind<K> && requires(metrics::Registry& m) {
    K::declare_metrics(m);
};

// K's parsed value in `c`, or K's defaults when `c` was not parsed with K's section.
template <class K>
const typename K::Config& source_config(const config::ShipperConfig& c) {
    if (const auto it = c.sources.find(K::kName); it != c.sources.end())
        if (const auto* v = std::any_cast<typename K::Config>(&it->second)) return *v;
    static const typename K::Config defaults = K::defaults();
    return defaults;
}

template <class K>
void set_source_config(config::ShipperConfig& c, typename K::Config v) {
    c.sources[K::kName] = std::move(v);
}

}  // namespace jobtrail::shipper
