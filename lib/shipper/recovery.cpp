#include "shipper/recovery.hpp"

#include "common/fs.hpp"

namespace jobtrail::shipper {
namespace {

// The node lane keeps the key of the single spool before lanes: an upgrade resumes where it was.
std::string key(Lane l) {
    return l == Lane::kNode ? "spool" : "spool_" + std::string(lane_name(l));
}

}  // namespace

Checkpoint read_checkpoint(const std::string& path) {
    Checkpoint cp;
    const auto text = read_small_file(path, 256 << 20);
    if (!text) return cp;
    const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
    if (!j.is_object()) return cp;
    if (auto s = j.find("sources"); s != j.end() && s->is_object()) cp.sources = *s;
    auto number = [](const nlohmann::json& o, const char* k) {
        auto it = o.find(k);
        return it != o.end() && it->is_number_unsigned() ? it->get<uint64_t>() : uint64_t{0};
    };
    for (Lane l : {Lane::kNode, Lane::kJobs})
        if (auto sp = j.find(key(l)); sp != j.end() && sp->is_object() && number(*sp, "segment") > 0)
            cp.spool_end[lane_index(l)] = spool::Position{number(*sp, "segment"), number(*sp, "offset")};
    return cp;
}

std::string checkpoint_text(const LaneEnds& ends, const std::vector<std::unique_ptr<Source>>& sources) {
    nlohmann::json s = nlohmann::json::object();
    for (const auto& src : sources) s[src->name()] = src->checkpoint();
    nlohmann::json cp = {{"sources", s}};
    for (Lane l : {Lane::kNode, Lane::kJobs}) {
        const auto& e = ends[lane_index(l)];
        cp[key(l)] = {{"segment", e.segment}, {"offset", e.offset}};
    }
    return cp.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void restore_sources(const Checkpoint& cp, std::vector<std::unique_ptr<Source>>& sources) {
    for (auto& src : sources)
        if (auto it = cp.sources.find(src->name()); it != cp.sources.end()) src->restore(*it);
}

Status recover_spool(spool::Spool& spool, Lane lane, const Checkpoint& cp) {
    const auto& end = cp.end(lane);
    if (end) return spool.discard_after(*end);
    // A checkpoint from a shipper that did not know this lane (a downgrade and back): its
    // sources' positions may be past what this lane holds, so nothing of it goes.
    for (const auto& e : cp.spool_end)
        if (e) return {};
    return spool.discard_after(spool.acked());
}

}  // namespace jobtrail::shipper
