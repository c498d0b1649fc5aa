#include "shipper/sources/journald/config.hpp"

#include <catch2/catch.hpp>

#include "config/config.hpp"
#include "config_errors.hpp"
#include "shipper/sources/registry.hpp"

using namespace jobtrail::config;
using namespace jobtrail::shipper;

using jobtrail::test::only_error;

TEST_CASE("journald units: absent means the defaults, an explicit empty list is refused", "[config][journald]") {
    auto e = only_error("shipper:\n  sources:\n    journald:\n      units: []\n");
    CHECK(e.key == "shipper.sources.journald.units");
    CHECK(e.line == 4);
    CHECK(e.message.find("every unit") != std::string::npos);
    auto r = parse_config("shipper:\n  sources:\n    journald: {units: []}\n", "h.yaml", source_sections());
    CHECK(source_config<JournaldKind>(r.config.shipper).units == JournaldKind::defaults().units);
    auto absent = parse_config("shipper:\n  sources:\n    journald: {enabled: true}\n", "h.yaml", source_sections());
    CHECK(absent.errors.empty());
    CHECK(source_config<JournaldKind>(absent.config.shipper).units == JournaldKind::defaults().units);
}
