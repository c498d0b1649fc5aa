#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "config/config.hpp"
#include "shipper/sources/registry.hpp"

namespace jobtrail::test {

// The one error a config snippet gives (every section known, the sources' too); fails the test
// if there is not exactly one.
inline config::ConfigError only_error(const std::string& yaml) {
    auto r = config::parse_config(yaml, "h.yaml", shipper::source_sections());
    std::string all;
    for (const auto& e : r.errors) all += e.text() + "\n";
    INFO(yaml << "gave:\n" << all);
    REQUIRE(r.errors.size() == 1);
    return r.errors[0];
}

}  // namespace jobtrail::test
