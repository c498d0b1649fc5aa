#pragma once

#include <memory>
#include <vector>

#include "config/config.hpp"
#include "kmsg/boot_clock.hpp"
#include "shipper/sources/source.hpp"

// The kinds of source the pipeline is built from, one row each (fluent-bit's plugin table):
// adding a source is one folder and one row here.
namespace jobtrail::shipper {

// What a source may need from the shipper when it is built.
struct SourceContext {
    const config::Config& cfg;
    const NodeInfo& node;
    Metrics& metrics;
    const Events& events;
    const kmsg::BootClock& clock;
};

struct SourceKind {
    const char* name;  // its section: shipper.sources.<name>
    void (*build)(const SourceContext& ctx, std::vector<std::unique_ptr<Source>>& out);
};

const std::vector<SourceKind>& source_kinds();

// Every configured source, in the table's order.
std::vector<std::unique_ptr<Source>> build_sources(const SourceContext& ctx);

}  // namespace jobtrail::shipper
