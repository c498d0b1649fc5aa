#include "config/config.hpp"

#include <catch2/catch.hpp>

using namespace jobtrail::config;

TEST_CASE("an empty file gives the documented defaults", "[config]") {
    auto r = parse_config("", "/etc/jobtrail/jobtrail.yaml");
    CHECK(r.errors.empty());
    CHECK(r.config.collector.log_dir == "/var/log/slurm");
    CHECK(r.config.collector.kmsg_path == "/dev/kmsg");
    CHECK(r.config.collector.prolog.scripts == std::vector<std::string>{"/etc/slurm/prolog.d/*"});
    CHECK(r.config.collector.epilog.fail_on_xid.empty());
    CHECK(r.config.collector.prolog.probes.size() == 2);
    CHECK(r.config.collector.epilog.probes.size() == 3);
}

TEST_CASE("values are read", "[config]") {
    auto r = parse_config(R"(
cluster: gpu-a
collector:
  log_dir: /data/log
  kmsg: /tmp/kmsg
  kernel_context: {records: 50, max_age: 5m}
  max_log_bytes: 8MiB
  prolog:
    scripts: [/etc/a/*, /etc/b.sh]
    script_timeout: 45s
    probes:
      - {name: smi, command: [nvidia-smi, -L], timeout: 3s}
  epilog:
    fail_on_xid: [79, 48]
)",
                          "t.yaml");
    INFO(r.errors.size());
    REQUIRE(r.errors.empty());
    const auto& c = r.config.collector;
    CHECK(r.config.cluster == "gpu-a");
    CHECK(c.log_dir == "/data/log");
    CHECK(c.context_records == 50);
    CHECK(c.context_ms == 300'000);
    CHECK(c.max_log_bytes == 8u << 20);
    CHECK(c.prolog.scripts.size() == 2);
    CHECK(c.prolog.script_timeout_ms == 45'000);
    REQUIRE(c.prolog.probes.size() == 1);
    CHECK(c.prolog.probes[0].argv == std::vector<std::string>{"nvidia-smi", "-L"});
    CHECK(c.prolog.probes[0].timeout_ms == 3000);
    CHECK(c.epilog.fail_on_xid == std::vector<int>{79, 48});
}

TEST_CASE("errors name the file, line and key, and keep the rest", "[config]") {
    auto r = parse_config("collector:\n  log_dir: /ok\n  script_timout: 5s\n  prolog:\n    script_timeout: soon\n",
                          "/etc/jobtrail/jobtrail.yaml");
    REQUIRE(r.errors.size() == 2);
    CHECK(r.errors[0].text().find("/etc/jobtrail/jobtrail.yaml:3:") == 0);
    CHECK(r.errors[0].key == "collector.script_timout");
    CHECK(r.errors[0].message.find("unknown key") != std::string::npos);
    CHECK(r.errors[1].key == "collector.prolog.script_timeout");
    CHECK(r.errors[1].line == 5);
    CHECK(r.errors[1].message.find("soon") != std::string::npos);
    CHECK(r.config.collector.log_dir == "/ok");
    CHECK(r.config.collector.prolog.script_timeout_ms == 300'000);
}

TEST_CASE("syntax errors and wrong types are reported", "[config]") {
    auto bad = parse_config("collector: [unclosed\n", "x.yaml");
    REQUIRE(bad.errors.size() == 1);
    CHECK(bad.errors[0].message.find("YAML syntax error") == 0);
    auto rel = parse_config("collector:\n  log_dir: relative/path\n", "x.yaml");
    REQUIRE(rel.errors.size() == 1);
    CHECK(rel.errors[0].message.find("absolute") != std::string::npos);
    auto xid = parse_config("collector:\n  epilog:\n    fail_on_xid: [79, lots]\n", "x.yaml");
    REQUIRE(xid.errors.size() == 1);
    CHECK(xid.errors[0].key == "collector.epilog.fail_on_xid");
    auto pro = parse_config("collector:\n  prolog:\n    fail_on_xid: [79]\n", "x.yaml");
    REQUIRE(pro.errors.size() == 1);  // only the epilog can drain on Xid
    auto probe = parse_config("collector:\n  epilog:\n    probes:\n      - {name: x}\n", "x.yaml");
    REQUIRE(probe.errors.size() == 1);
    CHECK(probe.errors[0].key == "collector.epilog.probes[0].command");
}

TEST_CASE("a missing file is reported as such", "[config]") {
    auto r = load_config("/nonexistent/jobtrail.yaml");
    CHECK(r.file_missing);
    CHECK(r.errors.empty());
}

TEST_CASE("the shipped etc/jobtrail.yaml parses cleanly and states the real defaults", "[config]") {
    auto r = load_config(std::string(JOBTRAIL_SOURCE_DIR) + "/etc/jobtrail.yaml");
    REQUIRE_FALSE(r.file_missing);
    for (const auto& e : r.errors) FAIL(e.text());
    const auto d = default_collector_config();
    const auto& c = r.config.collector;
    CHECK(c.log_dir == d.log_dir);
    CHECK(c.state_dir == d.state_dir);
    CHECK(c.context_records == d.context_records);
    CHECK(c.context_ms == d.context_ms);
    CHECK(c.max_log_bytes == d.max_log_bytes);
    CHECK(c.prolog.script_timeout_ms == d.prolog.script_timeout_ms);
    CHECK(c.prolog.scripts == d.prolog.scripts);
    REQUIRE(c.prolog.probes.size() == d.prolog.probes.size());
    for (size_t i = 0; i < c.prolog.probes.size(); ++i) CHECK(c.prolog.probes[i].argv == d.prolog.probes[i].argv);
    REQUIRE(c.epilog.probes.size() == d.epilog.probes.size());
    for (size_t i = 0; i < c.epilog.probes.size(); ++i) CHECK(c.epilog.probes[i].argv == d.epilog.probes[i].argv);
    CHECK(c.epilog.fail_on_xid.empty());
    const auto ds = default_shipper_config();
    const auto& sh = r.config.shipper;
    CHECK(sh.loki_url == "http://127.0.0.1:3100");
    CHECK(sh.spool_max_bytes == ds.spool_max_bytes);
    CHECK(sh.max_age_ms == ds.max_age_ms);
    CHECK(sh.max_line_bytes == ds.max_line_bytes);
    REQUIRE(sh.files.size() == ds.files.size());
    for (size_t i = 0; i < sh.files.size(); ++i) {
        CHECK(sh.files[i].job == ds.files[i].job);
        CHECK(sh.files[i].format == ds.files[i].format);
    }
    CHECK(sh.journald.enabled == ds.journald.enabled);
    CHECK(sh.journald.units == ds.journald.units);
    CHECK(sh.journald.since_ms == ds.journald.since_ms);
    CHECK(sh.heartbeat_ms == ds.heartbeat_ms);
    CHECK(sh.spool_fsync == ds.spool_fsync);
    const CliConfig dc;
    CHECK(r.config.cli.output_dir == dc.output_dir);
    CHECK(r.config.cli.margin_ms == dc.margin_ms);
    CHECK(r.config.cli.lookback_ms == dc.lookback_ms);
    CHECK(r.config.cli.parallel == dc.parallel);
}

TEST_CASE("cli section: read strictly, like every other section", "[config]") {
    auto r = parse_config("cli:\n  margin: 30m\n  parallel: 8\n  output_dir: /srv/bundles\n", "f.yaml");
    CHECK(r.errors.empty());
    CHECK(r.config.cli.margin_ms == 1'800'000);
    CHECK(r.config.cli.parallel == 8);
    CHECK(r.config.cli.output_dir == "/srv/bundles");
    r = parse_config("cli:\n  margn: 30m\n  parallel: 99\n", "f.yaml");
    REQUIRE(r.errors.size() == 2);
    CHECK(r.errors[0].text().find("margn") != std::string::npos);
    CHECK(r.errors[1].text().find("cli.parallel") != std::string::npos);
}

TEST_CASE("shipper section: errors name the key", "[config]") {
    auto r = parse_config(
        "shipper:\n  loki: {url: ftp://x}\n  sources:\n    files:\n      - {paths: [/a], format: xml}\n", "s.yaml");
    REQUIRE(r.errors.size() == 3);
    CHECK(r.errors[0].key == "shipper.loki.url");
    CHECK(r.errors[1].key == "shipper.sources.files[0].job");
    CHECK(r.errors[2].key == "shipper.sources.files[0].format");
}
