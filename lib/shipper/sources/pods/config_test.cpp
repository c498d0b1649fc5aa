#include "shipper/sources/pods/config.hpp"

#include <catch2/catch.hpp>

#include "captured.hpp"
#include "config/config.hpp"
#include "config_errors.hpp"
#include "shipper/sources/registry.hpp"

using namespace jobtrail::config;
using namespace jobtrail::shipper;

using jobtrail::test::only_error;

TEST_CASE("pods source: off by default, and its job value is the schema's", "[config][pods]") {
    auto none = parse_config("shipper: {}\n", "h.yaml", source_sections());
    CHECK(none.errors.empty());
    CHECK_FALSE(source_config<PodsKind>(none.config.shipper).enabled);
    CHECK(none.config.shipper.schema.job(jobtrail::node::StreamKind::kPod) == "kubernetes-pods");
    auto r = parse_config(
        "shipper:\n  sources:\n    pods:\n      enabled: true\n      root: /srv/pods/\n      job: k8s\n"
        "      job_id_pattern: '^sj-([0-9]+)'\n      nccl_containers: ['trainer', 'nccl-.*']\n"
        "      job_id_namespaces: [slurm, train]\n",
        "h.yaml", source_sections());
    CHECK(r.errors.empty());
    const auto& c = source_config<PodsKind>(r.config.shipper);
    CHECK(c.enabled);
    CHECK(c.root == "/srv/pods");
    CHECK(c.job_id_pattern == "^sj-([0-9]+)");
    CHECK(c.nccl_containers == std::vector<std::string>{"trainer", "nccl-.*"});
    CHECK(c.job_id_namespaces == std::vector<std::string>{"slurm", "train"});
    CHECK(source_config<PodsKind>(none.config.shipper).job_id_namespaces.empty());  // no pod is a job's by default
    CHECK(r.config.shipper.schema.job(jobtrail::node::StreamKind::kPod) == "k8s");
}

TEST_CASE("pods source: an unknown key is refused with file, line and key", "[config][pods]") {
    auto e = only_error("shipper:\n  sources:\n    pods:\n      enabled: true\n      namespaces: [train]\n");
    CHECK(e.file == "h.yaml");
    CHECK(e.line == 5);
    CHECK(e.key == "shipper.sources.pods.namespaces");
}

TEST_CASE("pods source: a job id pattern must compile and capture exactly the id", "[config][pods]") {
    ConfigError bad;
    // Said once, as our error at its line: not also by RE2 on stderr (the daemon's journal).
    CHECK(jobtrail::test::captured(2, [&] {
              bad = only_error("shipper:\n  sources:\n    pods:\n      job_id_pattern: 'job-([0-9]+'\n");
          }) == "");
    CHECK(bad.key == "shipper.sources.pods.job_id_pattern");
    CHECK(bad.line == 4);
    CHECK(bad.message.find("not a valid RE2 pattern") != std::string::npos);
    auto two = only_error("shipper:\n  sources:\n    pods:\n      job_id_pattern: '(a)-([0-9]+)'\n");
    CHECK(two.message.find("exactly one capture group") != std::string::npos);
    auto none = only_error("shipper:\n  sources:\n    pods:\n      job_id_pattern: 'job-[0-9]+'\n");
    CHECK(none.message.find("found 0") != std::string::npos);
    auto nccl = only_error("shipper:\n  sources:\n    pods:\n      nccl_containers: [ok, '[bad']\n");
    CHECK(nccl.key == "shipper.sources.pods.nccl_containers[1]");
    auto rel = only_error("shipper:\n  sources:\n    pods:\n      root: var/log/pods\n");
    CHECK(rel.key == "shipper.sources.pods.root");
}
