#include "config/config.hpp"

#include <catch2/catch.hpp>
#include <tuple>

#include "captured.hpp"
#include "config_errors.hpp"
#include "shipper/sources/registry.hpp"

using namespace jobtrail::config;
using jobtrail::shipper::FileKind;
using jobtrail::shipper::JournaldKind;
using jobtrail::shipper::source_config;
using jobtrail::shipper::source_sections;

TEST_CASE("an empty file gives the documented defaults", "[config]") {
    auto r = parse_config("", "/etc/jobtrail/jobtrail.yaml");
    CHECK(r.errors.empty());
    CHECK(r.config.collector.log_dir == "/var/log/slurm");
    CHECK(r.config.collector.kmsg_path == "/dev/kmsg");
    CHECK(r.config.collector.nvidia_proc == "/proc/driver/nvidia");
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
  nvidia_proc: /fixture/nvidia
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
    auto r = load_config(std::string(JOBTRAIL_SOURCE_DIR) + "/etc/jobtrail.yaml", source_sections());
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
    // The sources' sections, each its kind's (lib/shipper/sources/<kind>/config.hpp).
    const auto& files = source_config<FileKind>(sh);
    const auto ds_files = FileKind::defaults();
    REQUIRE(files.size() == ds_files.size());
    const jobtrail::shipper::FileSourceConfig df;
    for (size_t i = 0; i < files.size(); ++i) {
        CHECK(files[i].job == ds_files[i].job);
        CHECK(files[i].format == ds_files[i].format);
        CHECK(files[i].max_files == df.max_files);
        CHECK(files[i].max_files_per_dir == df.max_files_per_dir);
        CHECK(files[i].max_files_per_owner == df.max_files_per_owner);
        CHECK(files[i].max_open_files == df.max_open_files);
        CHECK(files[i].idle_close_ms == df.idle_close_ms);
        CHECK(files[i].max_partial_bytes == df.max_partial_bytes);
    }
    const auto& journald = source_config<JournaldKind>(sh);
    const auto ds_journald = JournaldKind::defaults();
    CHECK(journald.enabled == ds_journald.enabled);
    CHECK(journald.units == ds_journald.units);
    CHECK(journald.since_ms == ds_journald.since_ms);
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
    auto r =
        parse_config("shipper:\n  loki: {url: ftp://x}\n  sources:\n    files:\n      - {paths: [/a], format: xml}\n",
                     "s.yaml", source_sections());
    REQUIRE(r.errors.size() == 3);
    CHECK(r.errors[0].key == "shipper.loki.url");
    CHECK(r.errors[1].key == "shipper.sources.files[0].job");
    CHECK(r.errors[2].key == "shipper.sources.files[0].format");
}

using jobtrail::test::only_error;

TEST_CASE("a drop pattern RE2 cannot compile is an error with RE2's reason", "[config]") {
    ConfigError e;
    // Said once, as our error at its line: not also by RE2 on stderr (the daemon's journal).
    CHECK(jobtrail::test::captured(2, [&] {
              e = only_error(
                  "shipper:\n  stages:\n    drop:\n      - {name: ok, pattern: \"GET /health\"}\n"
                  "      - {name: bad, pattern: \"(unclosed\"}\n");
          }) == "");
    CHECK(e.key == "shipper.stages.drop[1].pattern");
    CHECK(e.line == 5);
    CHECK(e.message.find("not a valid RE2 pattern") != std::string::npos);
    CHECK(e.message.find("missing )") != std::string::npos);  // RE2's own words
    auto r = parse_config("shipper:\n  stages:\n    drop:\n      - {name: bad, pattern: \"a{2,1}\"}\n", "h.yaml");
    CHECK(r.config.shipper.drop.empty());
}

TEST_CASE("metrics: an IPv4 host and a port from 1 to 65535, or empty for none", "[config]") {
    for (const char* bad : {"127.0.0.1:notaport", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:", "localhost:9480",
                            "9480", "127.0.0.1:99999999999999999999"}) {
        INFO(bad);
        auto e = only_error("shipper:\n  heartbeat: 1m\n  metrics: \"" + std::string(bad) + "\"\n");
        CHECK(e.key == "shipper.metrics");
        CHECK(e.line == 3);
    }
    CHECK(only_error("shipper:\n  metrics: \"127.0.0.1:notaport\"\n").message.find("notaport") != std::string::npos);
    auto off = parse_config("shipper:\n  metrics: \"\"\n", "h.yaml");
    CHECK(off.errors.empty());
    CHECK(off.config.shipper.metrics_listen.empty());
    auto on = parse_config("shipper:\n  metrics: \"0.0.0.0:65535\"\n", "h.yaml");
    CHECK(on.errors.empty());
    CHECK(on.config.shipper.metrics_listen == "0.0.0.0:65535");
}

TEST_CASE("heartbeat: 0 means none, as documented", "[config]") {
    auto r = parse_config("shipper:\n  heartbeat: 0\n", "h.yaml");
    CHECK(r.errors.empty());
    CHECK(r.config.shipper.heartbeat_ms == 0);
    CHECK(only_error("shipper:\n  heartbeat: 10ms\n").key == "shipper.heartbeat");
}

TEST_CASE("sizes have floors and ceilings, and say them", "[config]") {
    auto e = only_error("shipper:\n  spool:\n    max_size: 1\n");
    CHECK(e.key == "shipper.spool.max_size");
    CHECK(e.line == 3);
    CHECK(e.message.find("16MiB") != std::string::npos);
    e = only_error("shipper:\n  max_line_bytes: 10\n");
    CHECK(e.key == "shipper.max_line_bytes");
    CHECK(e.line == 2);
    CHECK(e.message.find("1KiB") != std::string::npos);
    e = only_error("collector:\n  log_dir: /l\n  max_line_bytes: 10\n");
    CHECK(e.key == "collector.max_line_bytes");
    CHECK(e.line == 3);
    CHECK(only_error("collector:\n  max_log_bytes: 1KiB\n").key == "collector.max_log_bytes");
    CHECK(only_error("shipper:\n  batch: {max_bytes: 100}\n").key == "shipper.batch.max_bytes");
    CHECK(only_error("shipper:\n  batch: {max_bytes: 1GiB}\n").key == "shipper.batch.max_bytes");
    CHECK(only_error("shipper:\n  max_line_bytes: 1GiB\n").key == "shipper.max_line_bytes");
    auto ok = parse_config("shipper:\n  spool: {max_size: 16MiB}\n  max_line_bytes: 1KiB\n", "h.yaml");
    CHECK(ok.errors.empty());
    CHECK(ok.config.shipper.spool_max_bytes == 16u << 20);
}

TEST_CASE("durations are bounded: no overflowing or never-ending timeouts", "[config]") {
    // 106752d overflowed the prolog's nanosecond deadline: it returned 124 without running the
    // site's script, and slurmd drained the node.
    auto e = only_error("collector:\n  prolog:\n    total_timeout: 106752d\n");
    CHECK(e.key == "collector.prolog.total_timeout");
    CHECK(e.line == 3);
    CHECK(e.message.find("106752d") != std::string::npos);
    e = only_error("collector:\n  epilog:\n    script_timeout: 31d\n");
    CHECK(e.key == "collector.epilog.script_timeout");
    CHECK(e.message.find("30d") != std::string::npos);
    auto r = parse_config("collector:\n  prolog:\n    total_timeout: 106752d\n", "h.yaml");
    CHECK(r.config.collector.prolog.total_timeout_ms == 600'000);  // kept its default
    CHECK(only_error("collector:\n  prolog:\n    probes:\n      - {command: [x], timeout: 365d}\n").key ==
          "collector.prolog.probes[0].timeout");
    CHECK(only_error("collector:\n  kill_grace: 1d\n").key == "collector.kill_grace");
    CHECK(only_error("collector:\n  kill_grace: 1ms\n").key == "collector.kill_grace");
    CHECK(only_error("collector:\n  kmsg_budget: 1h\n").key == "collector.kmsg_budget");
    CHECK(only_error("collector:\n  slurm_cgroup_roots: [slurm]\n").message.find("'slurm' is not a cgroup path") !=
          std::string::npos);
    CHECK(parse_config("collector:\n  slurm_cgroup_roots: [/system.slice/n1_slurmstepd.scope]\n", "h.yaml")
              .config.collector.slurm_cgroup_roots == std::vector<std::string>{"/system.slice/n1_slurmstepd.scope"});
    CHECK(only_error("collector:\n  kernel_context: {max_age: 999d}\n").key == "collector.kernel_context.max_age");
    CHECK(only_error("shipper:\n  loki: {timeout: 1d}\n").key == "shipper.loki.timeout");
    CHECK(only_error("shipper:\n  batch: {max_wait: 1h}\n").key == "shipper.batch.max_wait");
    CHECK(only_error("shipper:\n  retry: {min_backoff: 1ms}\n").key == "shipper.retry.min_backoff");
    CHECK(only_error("shipper:\n  retry: {max_backoff: 30d}\n").key == "shipper.retry.max_backoff");
    CHECK(only_error("shipper:\n  retry: {min_backoff: 5m, max_backoff: 1m}\n").key == "shipper.retry.max_backoff");
    CHECK(only_error("shipper:\n  max_age: 1000d\n").key == "shipper.max_age");
    CHECK(only_error("shipper:\n  sources:\n    journald: {since: 1000d}\n").key == "shipper.sources.journald.since");
    CHECK(only_error("cli:\n  lookback: 106752d\n").key == "cli.lookback");
    CHECK(only_error("cli:\n  margin: 0\n").key == "cli.margin");
    auto ok = parse_config("collector:\n  prolog: {total_timeout: 30d, script_timeout: 100ms}\n", "h.yaml");
    CHECK(ok.errors.empty());
    CHECK(ok.config.collector.prolog.total_timeout_ms == 30LL * 86'400'000);
}

TEST_CASE("every key of every section is read into its setting", "[config]") {
    // Each value differs from its default: a key parsed into nothing, or into another setting, shows.
    auto r = parse_config(R"(
cluster: gpu-b
node: n042
collector:
  state_dir: /data/state
  run_dir: /data/run
  nccl_dir: /data/nccl
  kmsg: /fixture/kmsg
  gres_command: [/opt/slurm/sbin/slurmd, -G, -f, /opt/slurm/etc/slurm.conf]
  path: /opt/slurm/bin:/usr/bin
  slurm_cgroup_roots: [/slurm.slice, /system.slice/n1_slurmstepd.scope]
  max_line_bytes: 8KiB
  kill_grace: 3s
  kmsg_budget: 500ms
  prolog:
    total_timeout: 20m
    probes:
      - {name: lspci, command: [lspci], timeout: 7s}
  epilog:
    script_timeout: 90s
shipper:
  loki:
    url: https://loki.example:3100
    tenant: team-a
    username: shipper
    password_file: /etc/jobtrail/password
    bearer_token_file: /etc/jobtrail/token
    ca_file: /etc/jobtrail/ca.pem
    cert_file: /etc/jobtrail/cert.pem
    key_file: /etc/jobtrail/key.pem
    tls_verify: false
    timeout: 25s
    structured_metadata: false
  spool: {dir: /data/spool, max_size: 64MiB, fsync: false}
  batch: {max_bytes: 64KiB, max_wait: 250ms, max_in_flight: 7, max_stream_rate: 128KiB}
  retry: {min_backoff: 2s, max_backoff: 1m}
  max_age: 2d
  max_line_bytes: 4KiB
  metrics: 127.0.0.1:9555
  heartbeat: 45s
  stages:
    drop_blank: false
    nccl_noise: false
    nccl_budget: {bytes: 1MiB, window: 2m}
    drop:
      - {name: healthcheck, pattern: "GET /healthz"}
cli:
  lookback: 3d
)",
                          "all.yaml");
    for (const auto& e : r.errors) FAIL(e.text());
    CHECK(r.config.cluster == "gpu-b");
    CHECK(r.config.node == "n042");
    const auto& c = r.config.collector;
    CHECK(c.state_dir == "/data/state");
    CHECK(c.run_dir == "/data/run");
    CHECK(c.nccl_dir == "/data/nccl");
    CHECK(c.kmsg_path == "/fixture/kmsg");
    CHECK(c.gres_command ==
          std::vector<std::string>{"/opt/slurm/sbin/slurmd", "-G", "-f", "/opt/slurm/etc/slurm.conf"});
    CHECK(c.path == "/opt/slurm/bin:/usr/bin");
    CHECK(c.slurm_cgroup_roots == std::vector<std::string>{"/slurm.slice", "/system.slice/n1_slurmstepd.scope"});
    CHECK(c.max_line_bytes == 8u << 10);
    CHECK(c.kill_grace_ms == 3000);
    CHECK(c.kmsg_budget_ms == 500);
    CHECK(c.prolog.total_timeout_ms == 1'200'000);
    REQUIRE(c.prolog.probes.size() == 1);
    CHECK(c.prolog.probes[0].name == "lspci");
    CHECK(c.prolog.probes[0].timeout_ms == 7000);
    CHECK(c.epilog.script_timeout_ms == 90'000);
    const auto& s = r.config.shipper;
    CHECK(s.loki_url == "https://loki.example:3100");
    CHECK(s.tenant == "team-a");
    CHECK(s.basic_user == "shipper");
    CHECK(s.basic_password_file == "/etc/jobtrail/password");
    CHECK(s.bearer_token_file == "/etc/jobtrail/token");
    CHECK(s.ca_file == "/etc/jobtrail/ca.pem");
    CHECK(s.cert_file == "/etc/jobtrail/cert.pem");
    CHECK(s.key_file == "/etc/jobtrail/key.pem");
    CHECK_FALSE(s.tls_verify);
    CHECK(s.timeout_ms == 25'000);
    CHECK_FALSE(s.structured_metadata);
    CHECK(s.spool_dir == "/data/spool");
    CHECK(s.spool_max_bytes == 64u << 20);
    CHECK_FALSE(s.spool_fsync);
    CHECK(s.batch_max_bytes == 64u << 10);
    CHECK(s.batch_wait_ms == 250);
    CHECK(s.max_in_flight == 7);
    CHECK(s.max_stream_rate == 128u << 10);
    CHECK(s.min_backoff_ms == 2000);
    CHECK(s.max_backoff_ms == 60'000);
    CHECK(s.max_age_ms == 2 * 86'400'000LL);
    CHECK(s.max_line_bytes == 4u << 10);
    CHECK(s.metrics_listen == "127.0.0.1:9555");
    CHECK(s.heartbeat_ms == 45'000);
    CHECK_FALSE(s.drop_blank);
    CHECK_FALSE(s.nccl_noise);
    CHECK(s.nccl_budget_bytes == 1u << 20);
    CHECK(s.nccl_budget_window_ms == 120'000);
    REQUIRE(s.drop.size() == 1);
    CHECK(s.drop[0].name == "healthcheck");
    CHECK(s.drop[0].pattern == "GET /healthz");
    CHECK(r.config.cli.lookback_ms == 3 * 86'400'000LL);
}

TEST_CASE("settings of the wrong shape are errors at their key, and the rest is still read", "[config]") {
    const auto errors_of = [](const std::string& yaml) {
        auto r = parse_config(yaml, "s.yaml");
        std::string all;
        for (const auto& e : r.errors) all += e.text() + "\n";
        return all;
    };
    CHECK(errors_of("collector:\n  gres_command: []\n").find("key 'collector.gres_command': empty") !=
          std::string::npos);
    CHECK(errors_of("collector:\n  slurm_cgroup_roots: [slurm]\n").find("'slurm' is not a cgroup path") !=
          std::string::npos);
    CHECK(errors_of("collector:\n  slurm_cgroup_roots: [\"/a,/b\"]\n").find("'/a,/b' is not a cgroup path") !=
          std::string::npos);
    CHECK(errors_of("collector:\n  epilog:\n    probes: {name: x}\n").find("expected a list of probes") !=
          std::string::npos);
    CHECK(errors_of("collector:\n  epilog:\n    probes:\n      - {name: x, command: []}\n")
              .find("key 'collector.epilog.probes[0].command': empty: the program and its arguments") !=
          std::string::npos);
    CHECK(errors_of("shipper:\n  stages:\n    drop: {name: x}\n").find("expected a list of {name, pattern}") !=
          std::string::npos);
    CHECK(errors_of("shipper:\n  stages:\n    drop:\n      - {name: x}\n")
              .find("key 'shipper.stages.drop[0].pattern': missing: an RE2 pattern") != std::string::npos);
    CHECK(errors_of("shipper:\n  retry: {min_backoff: 5s, max_backoff: 5s}\n").empty());
    CHECK(errors_of("shipper:\n  retry: {min_backoff: 5s, max_backoff: 4s}\n")
              .find("max_backoff (4s) is below min_backoff (5s)") != std::string::npos);
    // The rest of the file is still read around a bad key.
    auto r = parse_config("collector:\n  slurm_cgroup_roots: [slurm]\n  kill_grace: 2s\n", "s.yaml");
    CHECK(r.config.collector.kill_grace_ms == 2000);
    CHECK(r.config.collector.slurm_cgroup_roots == default_collector_config().slurm_cgroup_roots);
}

TEST_CASE("the config file is the flag's, then JOBTRAIL_CONFIG's, then the default", "[config]") {
    const char* saved = std::getenv("JOBTRAIL_CONFIG");
    const std::string keep = saved ? saved : "";
    ::setenv("JOBTRAIL_CONFIG", "/env/jobtrail.yaml", 1);
    CHECK(resolve_config_path("/flag/jobtrail.yaml") == "/flag/jobtrail.yaml");
    CHECK(resolve_config_path("") == "/env/jobtrail.yaml");
    ::setenv("JOBTRAIL_CONFIG", "", 1);
    CHECK(resolve_config_path("") == kDefaultConfigPath);
    ::unsetenv("JOBTRAIL_CONFIG");
    CHECK(resolve_config_path("") == kDefaultConfigPath);
    if (saved) ::setenv("JOBTRAIL_CONFIG", keep.c_str(), 1);
}
