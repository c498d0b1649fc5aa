#include "shipper/sources/registry.hpp"

#include "shipper/sources/source.hpp"

namespace jobtrail::shipper {
namespace {

template <class... K>
void build_all(KindList<K...>, const SourceContext& ctx, Sources& out) {
    (K::build(ctx, source_config<K>(ctx.cfg.shipper), out), ...);
}

template <class... K>
void declare_all(KindList<K...>, metrics::Registry& m) {
    auto one = [&m]<class Kind>() {
        if constexpr (CountingSourceKind<Kind>) Kind::declare_metrics(m);
    };
    (one.template operator()<K>(), ...);
}

}  // namespace

void declare_source_metrics(metrics::Registry& m) {
    declare_all(SourceKinds{}, m);
}

Sources build_sources(const SourceContext& ctx) {
    Sources out;
    build_all(SourceKinds{}, ctx, out);
    return out;
}

}  // namespace jobtrail::shipper
