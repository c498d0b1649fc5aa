#pragma once

#include <yaml-cpp/yaml.h>

#include <any>
#include <memory>
#include <string>
#include <vector>

#include "config/shipper_config.hpp"
#include "node/schema.hpp"

namespace jobtrail::config {
class Parser;
}

// What a kind of source is. Each kind is a type K in its own folder, sources/<kind>/:
//   K::kName                  its section, shipper.sources.<kName>
//   K::Config                 what the section holds (<kind>/config.hpp)
//   K::defaults()             the value when the section is absent      } <kind>/config.cpp: no
//   K::parse(p, sources, w, c) the section, strictly (file:line:key)    } source code, so the CLI
//   K::schema(c, s)           the `job` values of the streams it makes  } and collectors link it
//   K::build(ctx, c, out)     its sources (<kind>/<kind>_source.cpp, the shipper)
// and one row in registry.hpp's SourceKinds.
namespace jobtrail::shipper {

class Source;
struct SourceContext;
using Sources = std::vector<std::unique_ptr<Source>>;

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
