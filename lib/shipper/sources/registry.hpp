#pragma once

#include "config/sources.hpp"
#include "shipper/sources/dcgm/config.hpp"
#include "shipper/sources/file/config.hpp"
#include "shipper/sources/journald/config.hpp"
#include "shipper/sources/kind.hpp"
#include "shipper/sources/kmsg/config.hpp"
#include "shipper/sources/pods/config.hpp"

// The kinds of source, one row each (fluent-bit's plugin table): each row names its section,
// its parse (<kind>/config.cpp) and its build (<kind>/<kind>_source.cpp) through the kind's type
// (kind.hpp's SourceKind, checked here). Adding a source is one folder and one row here.
namespace jobtrail::shipper {

template <SourceKind... K>
struct KindList {};

using SourceKinds = KindList<KmsgKind, FileKind, JournaldKind, PodsKind, DcgmKind>;

// Every kind's section under shipper.sources, in the rows' order, for config::load_config and
// config::parse_config (sections.cpp: parse only, so the CLI and the collectors link no source).
config::SourceSections source_sections();

// Every configured source, in the rows' order (registry.cpp: the shipper).
Sources build_sources(const SourceContext& ctx);

// Every kind's own metrics, configured or not, so that /metrics always has them.
void declare_source_metrics(metrics::Registry& m);

}  // namespace jobtrail::shipper
