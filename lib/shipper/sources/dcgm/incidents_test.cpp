#include "shipper/sources/dcgm/incidents.hpp"

#include <catch2/catch.hpp>

using namespace jobtrail::shipper::dcgm_source;

namespace {

jobtrail::dcgm::Incident incident(unsigned gpu, const std::string& code, const std::string& health = "warn") {
    return {gpu, code, "pcie", health, "DCGM's words about " + code};
}

std::string bus(unsigned gpu) {
    return "00000000:" + std::to_string(gpu) + ":00.0";
}

}  // namespace

TEST_CASE("dcgm incidents: at most kMax held from a check, each code once, the ones past it neither said nor cleared",
          "[shipper][dcgm][hostile]") {
    // A host engine (or a library standing in for it) may list more incidents than DCGM ever
    // does: what is held is bounded, exactly at the cap, and a code listed twice is one line.
    ActiveIncidents a;
    Check c{1'000'000, {}};
    for (size_t i = 0; i < ActiveIncidents::kMax + 5; ++i)
        c.incidents.push_back(incident(0, "DCGM_FR_" + std::to_string(i)));
    c.incidents.insert(c.incidents.begin() + 1, incident(0, "DCGM_FR_0"));  // listed twice
    const auto first = a.apply(c, bus);
    REQUIRE(first.size() == ActiveIncidents::kMax);
    CHECK(first.front().code == "DCGM_FR_0");
    CHECK(first.front().pci_bdf == "00000000:0:00.0");
    CHECK(first.front().message == "DCGM's words about DCGM_FR_0");
    CHECK(first.back().code == "DCGM_FR_" + std::to_string(ActiveIncidents::kMax - 1));
    CHECK(a.to_json().size() == ActiveIncidents::kMax);
    // The same check again: nothing new, nothing cleared.
    CHECK(a.apply(c, bus).empty());
    // A new verdict is a new line; a new message alone is not; one gone is cleared.
    Check next{2'000'000, {incident(0, "DCGM_FR_0", "fail"), incident(0, "DCGM_FR_1")}};
    next.incidents[1].message = "another reading";
    const auto second = a.apply(next, bus);
    REQUIRE(second.size() == 1 + (ActiveIncidents::kMax - 2));
    CHECK(second[0].code == "DCGM_FR_0");
    CHECK(second[0].health == "fail");
    CHECK_FALSE(second[0].cleared);
    CHECK(second[1].cleared);
    CHECK(second[1].ts_us == 2'000'000);
}

TEST_CASE("dcgm incidents: a checkpoint is read back to at most kMax entries, skipping what is no incident",
          "[shipper][dcgm][hostile]") {
    nlohmann::json j = nlohmann::json::array();
    j.push_back("not an object");
    j.push_back({{"gpu", -1}, {"code", "X"}, {"system", "pcie"}, {"health", "warn"}});
    j.push_back({{"gpu", 4294967296ULL}, {"code", "X"}, {"system", "pcie"}, {"health", "warn"}});
    j.push_back({{"gpu", 1}, {"code", 7}, {"system", "pcie"}, {"health", "warn"}});
    j.push_back({{"gpu", 1}, {"code", "X"}, {"health", "warn"}});
    for (size_t i = 0; i < ActiveIncidents::kMax + 3; ++i)
        j.push_back(
            {{"gpu", 4294967295ULL}, {"code", "C" + std::to_string(i)}, {"system", "pcie"}, {"health", "warn"}});
    ActiveIncidents a;
    a.from_json(j);
    const auto back = a.to_json();
    REQUIRE(back.size() == ActiveIncidents::kMax);
    CHECK(back[0]["gpu"] == 4294967295ULL);
    a.from_json("garbage");
    CHECK(a.to_json().empty());
}
