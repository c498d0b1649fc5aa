#include "shipper/recovery.hpp"

#include "common/fs.hpp"

namespace jobtrail::shipper {

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
    if (auto sp = j.find("spool"); sp != j.end() && sp->is_object() && number(*sp, "segment") > 0)
        cp.spool_end = spool::Position{number(*sp, "segment"), number(*sp, "offset")};
    return cp;
}

std::string checkpoint_text(const spool::Position& end, const std::vector<std::unique_ptr<Source>>& sources) {
    nlohmann::json s = nlohmann::json::object();
    for (const auto& src : sources) s[src->name()] = src->checkpoint();
    const nlohmann::json cp = {{"spool", {{"segment", end.segment}, {"offset", end.offset}}}, {"sources", s}};
    return cp.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void restore_sources(const Checkpoint& cp, std::vector<std::unique_ptr<Source>>& sources) {
    for (auto& src : sources)
        if (auto it = cp.sources.find(src->name()); it != cp.sources.end()) src->restore(*it);
}

bool recover_spool(spool::Spool& spool, const Checkpoint& cp, std::string& err) {
    return spool.discard_after(cp.spool_end ? *cp.spool_end : spool.acked(), err);
}

}  // namespace jobtrail::shipper
