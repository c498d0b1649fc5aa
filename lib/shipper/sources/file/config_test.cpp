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

TEST_CASE("file source errors: each said at its key with what is expected", "[config][file]") {
    const std::string head = "shipper:\n  sources:\n    files:\n";
    for (const auto& [yaml, key, says] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"      {a: b}\n", "files", "expected a list of file sources"},
             {"      - {job: app}\n", "files[0].paths", "missing: at least one path or glob"},
             {"      - {paths: [/a]}\n", "files[0].job", "missing: the Loki job label"},
             {"      - {paths: [/a], job: app, format: json}\n", "files[0].format",
              "expected plain, joblog, nccl or cri"},
             {"      - {paths: [/a], job: app, labels: {team: \"\"}}\n", "files[0].labels.team",
              "expected a non-empty string value"}}) {
        INFO(yaml);
        const auto e = only_error(head + yaml);
        CHECK(e.key == "shipper.sources." + key);
        CHECK(e.message.find(says) != std::string::npos);
    }
    // Only the kinds a file may be: the others are other sources' streams.
    for (const char* kind : {"kernel", "journal", "jobtrail-shipper", "pod", "dcgm", "no-such-kind"}) {
        INFO(kind);
        const auto e = only_error(head + "      - {paths: [/a], job: app, stream: " + kind + "}\n");
        CHECK(e.key == "shipper.sources.files[0].stream");
        CHECK(e.message.find("expected job-log, nccl, fabric-manager or other") != std::string::npos);
    }
}

TEST_CASE("file source settings: the format sets the stream kind unless stream says it and the name is the job's",
          "[config][file]") {
    auto ok = parse_config(
        "shipper:\n  sources:\n    files:\n"
        "      - {paths: [/a], job: a}\n"
        "      - {paths: [/b], job: b, name: bee, format: joblog}\n"
        "      - {paths: [/c], job: c, format: nccl}\n"
        "      - {paths: [/d], job: d, format: cri, stream: fabric-manager}\n"
        "      - {paths: [/e, /f], job: e, stream: other, max_files: 5, max_files_per_dir: 6, release_after: 1h}\n",
        "h.yaml", source_sections());
    REQUIRE(ok.errors.empty());
    const auto& f = source_config<FileKind>(ok.config.shipper);
    REQUIRE(f.size() == 5);
    using jobtrail::node::StreamKind;
    const std::vector<std::tuple<std::string, LineFormat, StreamKind>> want = {
        {"a", LineFormat::kPlain, StreamKind::kOther},
        {"bee", LineFormat::kJoblog, StreamKind::kJobLog},
        {"c", LineFormat::kNccl, StreamKind::kNccl},
        {"d", LineFormat::kCri, StreamKind::kFabricManager},
        {"e", LineFormat::kPlain, StreamKind::kOther}};
    for (size_t i = 0; i < f.size(); ++i) {
        INFO(i);
        CHECK(std::tuple{f[i].name, f[i].format, f[i].stream} == want[i]);
    }
    CHECK(f[4].paths == std::vector<std::string>{"/e", "/f"});
    CHECK(f[4].max_files == 5);
    CHECK(f[4].max_files_per_dir == 6);
    CHECK(f[4].release_after_ms == 3'600'000);
}
