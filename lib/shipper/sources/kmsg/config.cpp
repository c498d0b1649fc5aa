#include "shipper/sources/kmsg/config.hpp"

#include "config/yaml_parser.hpp"

namespace jobtrail::shipper {

void KmsgKind::parse(config::Parser& p, const YAML::Node& sources, const std::string& where, Config& out) {
    p.boolean(sources, where, kName, out.enabled);
}

}  // namespace jobtrail::shipper
