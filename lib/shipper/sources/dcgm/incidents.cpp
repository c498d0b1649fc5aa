#include "shipper/sources/dcgm/incidents.hpp"

#include <cstdint>

namespace jobtrail::shipper::dcgm_source {

std::vector<dcgm::Event> ActiveIncidents::apply(const Check& check, const BusId& bus_id) {
    std::vector<dcgm::Event> out;
    auto event = [&](unsigned gpu, const std::string& code, const std::string& system, const std::string& health) {
        dcgm::Event e;
        e.kind = dcgm::Kind::kHealth;
        e.ts_us = check.ts_us;
        e.gpu = gpu;
        e.pci_bdf = bus_id(gpu);
        e.code = code;
        e.system = system;
        e.health = health;
        return e;
    };
    std::map<Key, std::string> now;
    for (const auto& i : check.incidents) {
        Key k{i.gpu, i.code, i.system};
        if (now.size() >= kMax || now.contains(k)) continue;  // one line for a code listed twice
        now.emplace(k, i.health);
        if (const auto it = active_.find(k); it != active_.end() && it->second == i.health) continue;
        out.push_back(event(i.gpu, i.code, i.system, i.health));
        out.back().message = i.message;
    }
    for (const auto& [k, health] : active_)
        if (!now.contains(k)) {
            out.push_back(event(std::get<0>(k), std::get<1>(k), std::get<2>(k), health));
            out.back().cleared = true;
        }
    active_ = std::move(now);
    return out;
}

nlohmann::json ActiveIncidents::to_json() const {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& [k, health] : active_)
        a.push_back(
            {{"gpu", std::get<0>(k)}, {"code", std::get<1>(k)}, {"system", std::get<2>(k)}, {"health", health}});
    return a;
}

void ActiveIncidents::from_json(const nlohmann::json& j) {
    active_.clear();
    if (!j.is_array()) return;
    for (const auto& i : j) {
        if (active_.size() >= kMax) break;
        if (!i.is_object()) continue;
        const auto gpu = i.find("gpu");
        const auto code = i.find("code"), system = i.find("system"), health = i.find("health");
        if (gpu == i.end() || !gpu->is_number_unsigned() || gpu->get<uint64_t>() > UINT32_MAX || code == i.end() ||
            !code->is_string() || system == i.end() || !system->is_string() || health == i.end() ||
            !health->is_string())
            continue;
        active_.emplace(Key{gpu->get<unsigned>(), code->get<std::string>(), system->get<std::string>()},
                        health->get<std::string>());
    }
}

}  // namespace jobtrail::shipper::dcgm_source
