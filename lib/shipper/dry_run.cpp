#include "shipper/dry_run.hpp"

#include "common/time.hpp"

namespace jobtrail::shipper {

void print_dry_run(std::vector<std::unique_ptr<Source>>& sources, Stages& stages, size_t pass_bytes, std::FILE* out) {
    std::vector<Event> events;
    for (auto& src : sources) {
        events.clear();
        while (src->poll(events, pass_bytes)) {
        }
        src->flush_partial(events);
        stages.apply(events);
        for (auto& e : events) {
            if (e.dropped) continue;
            add_first_line_metadata(e);
            std::fprintf(out, "%s %s %s", format_rfc3339_ns(e.ts_ns).c_str(), e.origin->stream.c_str(), e.line.c_str());
            for (const Metadata* md : {&e.origin->metadata, static_cast<const Metadata*>(&e.metadata)})
                for (const auto& [k, v] : *md) std::fprintf(out, " |%s=%s", k.c_str(), v.c_str());
            std::fprintf(out, "\n");
        }
    }
}

}  // namespace jobtrail::shipper
