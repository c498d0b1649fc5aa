#pragma once

#include <yaml-cpp/yaml.h>

#include <any>
#include <functional>
#include <map>
#include <span>
#include <string>

#include "node/schema.hpp"

namespace jobtrail::config {

class Parser;

// The sections under shipper.sources belong to the shipper's sources, not to lib/config: each
// kind of source parses its own beside its code (lib/shipper/sources/<kind>/config.cpp) and keeps
// the result here, opaque to everyone but that kind. The caller of parse_config hands the kinds'
// sections in (lib/shipper/sources/sections.hpp has every kind's).
struct SourceSection {
    const char* name;  // shipper.sources.<name>
    // Its value when the section is absent.
    std::any (*defaults)();
    // Reads shipper.sources.<name> from `sources` (the shipper.sources mapping, at `where`)
    // strictly, with Parser's file:line:key errors; `value` holds the defaults.
    void (*parse)(Parser& p, const YAML::Node& sources, const std::string& where, std::any& value);
    // The `job` values of the kinds of stream its sources make (the CLI and stages ask the schema).
    void (*schema)(const std::any& value, node::Schema& s);
};
using SourceSections = std::span<const SourceSection>;

// Each section's parsed value, by name.
using SourceValues = std::map<std::string, std::any, std::less<>>;

}  // namespace jobtrail::config
