#include <array>

#include "shipper/sources/registry.hpp"

namespace jobtrail::shipper {
namespace {

template <class K>
config::SourceSection section() {
    using C = typename K::Config;
    return {K::kName, [] { return std::any(K::defaults()); },
            [](config::Parser& p, const YAML::Node& sources, const std::string& where, std::any& v) {
                if (!std::any_cast<C>(&v)) v = K::defaults();
                K::parse(p, sources, where, *std::any_cast<C>(&v));
            },
            [](const std::any& v, node::Schema& s) {
                if (const auto* c = std::any_cast<C>(&v))
                    K::schema(*c, s);
                else
                    K::schema(K::defaults(), s);
            }};
}

template <class... K>
config::SourceSections sections(KindList<K...>) {
    static const std::array<config::SourceSection, sizeof...(K)> table{section<K>()...};
    return table;
}

}  // namespace

config::SourceSections source_sections() {
    return sections(SourceKinds{});
}

}  // namespace jobtrail::shipper
