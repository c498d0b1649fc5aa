#include "shipper/sources/file/config.hpp"

#include <catch2/catch.hpp>
#include <tuple>

#include "config/config.hpp"
#include "config_errors.hpp"
#include "shipper/sources/registry.hpp"

using namespace jobtrail::config;
using namespace jobtrail::shipper;

using jobtrail::test::only_error;

TEST_CASE("file source labels: Loki label names only, never the ones jobtrail sets", "[config][file]") {
    auto e = only_error(
        "shipper:\n  sources:\n    files:\n      - name: a\n        paths: [/a]\n        job: app\n"
        "        labels: {team: ml, bad-name: x}\n");
    CHECK(e.key == "shipper.sources.files[0].labels.bad-name");
    CHECK(e.line == 7);
    CHECK(e.text().find("h.yaml:7:") == 0);
    CHECK(e.message.find("not a Loki label name") != std::string::npos);
    for (const char* reserved : {"cluster", "node", "job", "job_id", "service_name"}) {
        INFO(reserved);
        e = only_error("shipper:\n  sources:\n    files:\n      - {paths: [/a], job: app, labels: {" +
                       std::string(reserved) + ": evil}}\n");
        CHECK(e.key == "shipper.sources.files[0].labels." + std::string(reserved));
        CHECK(e.line == 4);
        CHECK(e.message.find("set by jobtrail") != std::string::npos);
    }
    CHECK(only_error("shipper:\n  sources:\n    files:\n      - {paths: [/a], job: app, labels: {__x: y}}\n").key ==
          "shipper.sources.files[0].labels.__x");
    CHECK(only_error("shipper:\n  sources:\n    files:\n      - {paths: [/a], job: app, labels: {x: {a: b}}}\n").key ==
          "shipper.sources.files[0].labels.x");
    auto ok = parse_config("shipper:\n  sources:\n    files:\n      - {paths: [/a], job: app, labels: {Team_2: ml}}\n",
                           "h.yaml", source_sections());
    REQUIRE(ok.errors.empty());
    CHECK(source_config<FileKind>(ok.config.shipper)[0].labels ==
          std::vector<std::pair<std::string, std::string>>{{"Team_2", "ml"}});
}

TEST_CASE("file source bounds: each refused out of range with its line and key, and read when valid",
          "[config][file]") {
    const std::string head = "shipper:\n  sources:\n    files:\n      - paths: [/a]\n        job: app\n";
    for (const auto& [key, bad, floor] :
         std::vector<std::tuple<std::string, std::string, std::string>>{{"max_files_per_owner", "0", "1"},
                                                                        {"max_open_files", "0", "1"},
                                                                        {"max_open_files", "100000", "16384"},
                                                                        {"idle_close", "10ms", "1s"},
                                                                        {"idle_close", "400d", "1d"},
                                                                        {"max_partial_bytes", "1KiB", "64KiB"},
                                                                        {"max_partial_bytes", "64GiB", "1GiB"}}) {
        INFO(key << ": " << bad);
        auto e = only_error(head + "        " + key + ": " + bad + "\n");
        CHECK(e.key == "shipper.sources.files[0]." + key);
        CHECK(e.line == 6);
        CHECK(e.message.find(floor) != std::string::npos);  // the range it should be in
    }
    auto ok = parse_config(head +
                               "        max_files_per_owner: 7\n        max_open_files: 9\n        idle_close: 2m\n"
                               "        max_partial_bytes: 1MiB\n",
                           "h.yaml", source_sections());
    REQUIRE(ok.errors.empty());
    const auto& f = source_config<FileKind>(ok.config.shipper)[0];
    CHECK(f.max_files_per_owner == 7);
    CHECK(f.max_open_files == 9);
    CHECK(f.idle_close_ms == 120'000);
    CHECK(f.max_partial_bytes == 1u << 20);
}

TEST_CASE("file source labels that are no mapping are an error at their line", "[config][file]") {
    for (const char* labels : {"[team, ml]", "team=ml"}) {
        INFO(labels);
        const auto e = only_error(
            "shipper:\n  sources:\n    files:\n      - name: a\n        paths: [/a]\n"
            "        job: app\n        labels: " +
            std::string(labels) + "\n");
        CHECK(e.key == "shipper.sources.files[0].labels");
        CHECK(e.line == 7);
        CHECK(e.message.find("expected a mapping of label names to values") != std::string::npos);
    }
}
