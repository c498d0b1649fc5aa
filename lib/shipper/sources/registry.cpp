#include "shipper/sources/registry.hpp"

#include "shipper/sources/file_source.hpp"
#include "shipper/sources/journald_source.hpp"
#include "shipper/sources/kmsg_source.hpp"

namespace jobtrail::shipper {
namespace {

void build_kmsg(const SourceContext& c, std::vector<std::unique_ptr<Source>>& out) {
    if (c.cfg.shipper.kmsg)
        out.push_back(std::make_unique<KmsgSource>(c.cfg.collector.kmsg_path, c.clock, c.node, c.metrics, c.events));
}

void build_files(const SourceContext& c, std::vector<std::unique_ptr<Source>>& out) {
    for (const auto& f : c.cfg.shipper.files)
        out.push_back(
            std::make_unique<FileSource>(f, c.node, c.cfg.shipper.max_line_bytes, c.metrics, 2000, c.events, 1000));
}

void build_journald(const SourceContext& c, std::vector<std::unique_ptr<Source>>& out) {
    const auto& j = c.cfg.shipper.journald;
    if (!j.enabled) return;
    if (!JournaldSource::available()) {
        c.events.emit(Severity::kWarning, "journald", "not_built",
                      "shipper.sources.journald is enabled but this build has no libsystemd: not read");
        return;
    }
    out.push_back(std::make_unique<JournaldSource>(j, c.node, c.cfg.shipper.max_line_bytes, c.metrics, c.events));
}

}  // namespace

const std::vector<SourceKind>& source_kinds() {
    static const std::vector<SourceKind> kinds = {
        {"kmsg", build_kmsg},
        {"files", build_files},
        {"journald", build_journald},
    };
    return kinds;
}

std::vector<std::unique_ptr<Source>> build_sources(const SourceContext& ctx) {
    std::vector<std::unique_ptr<Source>> out;
    for (const auto& k : source_kinds()) k.build(ctx, out);
    return out;
}

}  // namespace jobtrail::shipper
