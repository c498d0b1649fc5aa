#include "forensics/xid_search.hpp"

#include <catch2/catch.hpp>

#include "common/time.hpp"
#include "loki/push.hpp"
#include "loki_double.hpp"

using namespace jobtrail;
using namespace jobtrail::forensics;

TEST_CASE("jobtrail xid without a cluster name counts every cluster's Xids and names the clusters",
          "[forensics][cli][double]") {
    test::LokiDouble loki;
    loki::Endpoint ep;
    ep.url = loki.url();
    loki::Client c(ep);
    const int64_t t = realtime_ns() - 3'600'000'000'000;
    std::vector<loki::Stream> streams(2);
    streams[0].labels = {{"job", "kmsg"}, {"node", "gpu01"}, {"cluster", "c1"}};
    streams[0].entries = {{t, "NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.", {}}};
    streams[1].labels = {{"job", "kmsg"}, {"node", "gpu02"}};
    streams[1].entries = {{t + 1, "NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.", {}}};
    REQUIRE(c.push(loki::encode_push(streams, false)).status == 204);
    XidTable table;
    const auto s = find_xids(c, Scope{}, {}, t - 60'000'000'000, realtime_ns(), {}, false, table);
    INFO(s.error);
    REQUIRE_FALSE(s.failed);
    CHECK(s.foreign == 0);
    CHECK(s.clusters == std::set<std::string>{"", "c1"});
    CHECK(table.json().size() == 2);
}
