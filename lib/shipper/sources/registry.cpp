#include "shipper/sources/registry.hpp"

#include "shipper/sources/source.hpp"

namespace jobtrail::shipper {
namespace {

template <class... K>
void build_all(KindList<K...>, const SourceContext& ctx, Sources& out) {
    (K::build(ctx, source_config<K>(ctx.cfg.shipper), out), ...);
}

}  // namespace

Sources build_sources(const SourceContext& ctx) {
    Sources out;
    build_all(SourceKinds{}, ctx, out);
    return out;
}

}  // namespace jobtrail::shipper
