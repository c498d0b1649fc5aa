#include "shipper/sources/dcgm/config.hpp"

#include <catch2/catch.hpp>

#include "config/config.hpp"
#include "config_errors.hpp"
#include "shipper/sources/registry.hpp"

using namespace jobtrail::config;
using namespace jobtrail::shipper;

using jobtrail::test::only_error;

TEST_CASE("dcgm source: off by default, every option read, its job value the schema's", "[config][dcgm]") {
    auto none = parse_config("shipper: {}\n", "h.yaml", source_sections());
    CHECK(none.errors.empty());
    const auto& d = source_config<DcgmKind>(none.config.shipper);
    CHECK_FALSE(d.enabled);
    CHECK(d.client.address.empty());
    CHECK(d.client.libraries == std::vector<std::string>{"libdcgm.so.4", "libdcgm.so.3"});
    CHECK(none.config.shipper.schema.job(jobtrail::node::StreamKind::kDcgm) == "dcgm");
    auto r = parse_config(
        "shipper:\n  sources:\n    dcgm:\n      enabled: true\n      address: unix:/run/dcgm.sock\n"
        "      libraries: [/opt/dcgm/lib/libdcgm.so.4]\n      health_interval: 10s\n      call_timeout: 2s\n"
        "      queue_size: 64\n      job: gpu-events\n",
        "h.yaml", source_sections());
    CHECK(r.errors.empty());
    const auto& c = source_config<DcgmKind>(r.config.shipper);
    CHECK(c.enabled);
    CHECK(c.client.address == "unix:/run/dcgm.sock");
    CHECK(c.client.libraries == std::vector<std::string>{"/opt/dcgm/lib/libdcgm.so.4"});
    CHECK(c.health_interval_ms == 10'000);
    CHECK(c.client.call_timeout_ms == 2'000);
    CHECK(c.queue_size == 64);
    CHECK(r.config.shipper.schema.job(jobtrail::node::StreamKind::kDcgm) == "gpu-events");
}

TEST_CASE("dcgm source: bad values are refused with file, line and key", "[config][dcgm]") {
    auto unknown = only_error("shipper:\n  sources:\n    dcgm:\n      enabled: true\n      interval: 5s\n");
    CHECK(unknown.file == "h.yaml");
    CHECK(unknown.line == 5);
    CHECK(unknown.key == "shipper.sources.dcgm.interval");
    CHECK(unknown.message.find("health_interval") != std::string::npos);  // the allowed keys are listed
    auto sock = only_error("shipper:\n  sources:\n    dcgm:\n      address: unix:run/dcgm.sock\n");
    CHECK(sock.key == "shipper.sources.dcgm.address");
    CHECK(sock.line == 4);
    auto rel = only_error("shipper:\n  sources:\n    dcgm:\n      libraries: [libdcgm.so.4, lib/libdcgm.so.3]\n");
    CHECK(rel.key == "shipper.sources.dcgm.libraries[1]");
    CHECK(rel.message.find("absolute path") != std::string::npos);
    auto empty = only_error("shipper:\n  sources:\n    dcgm:\n      libraries: []\n");
    CHECK(empty.key == "shipper.sources.dcgm.libraries");
    auto fast = only_error("shipper:\n  sources:\n    dcgm:\n      health_interval: 100ms\n");
    CHECK(fast.key == "shipper.sources.dcgm.health_interval");
    CHECK(fast.message.find("out of range") != std::string::npos);
    auto timeout = only_error("shipper:\n  sources:\n    dcgm:\n      call_timeout: 10m\n");
    CHECK(timeout.key == "shipper.sources.dcgm.call_timeout");
    auto queue = only_error("shipper:\n  sources:\n    dcgm:\n      queue_size: 0\n");
    CHECK(queue.key == "shipper.sources.dcgm.queue_size");
    auto huge = only_error("shipper:\n  sources:\n    dcgm:\n      queue_size: 1000000\n");
    CHECK(huge.message == "expected an integer from 16 to 65536");
    auto notmap = only_error("shipper:\n  sources:\n    dcgm: true\n");
    CHECK(notmap.key == "shipper.sources.dcgm");
}
