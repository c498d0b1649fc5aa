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

TEST_CASE("jobtrail xid over 90 days finds the kernel's and DCGM's Xids of every month in it",
          "[forensics][cli][double]") {
    // Read a month at a time from the newest: an Xid two months back is in the table from
    // either source, not only those of the newest month.
    test::LokiDouble loki({"--reject-old-samples-max-age", std::to_string(100 * 86400)});
    loki::Endpoint ep;
    ep.url = loki.url();
    loki::Client c(ep);
    const int64_t now = realtime_ns(), day = 86'400'000'000'000;
    std::vector<loki::Stream> streams(2);
    streams[0].labels = {{"job", "kmsg"}, {"node", "gpu01"}};
    streams[1].labels = {{"job", "dcgm"}, {"node", "gpu01"}, {"gpu", "3"}};
    for (const int64_t ago : {60, 2}) {
        streams[0].entries.push_back(
            {now - ago * day, "NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.", {}});
        streams[1].entries.push_back({now - ago * day + 1, "XID 48 on GPU 3", {}});
    }
    REQUIRE(c.push(loki::encode_push(streams, false)).status == 204);
    XidTable table;
    const auto s = find_xids(c, Scope{}, {}, now - 90 * day, now, {}, false, table);
    INFO(s.error);
    REQUIRE_FALSE(s.failed);
    const auto j = table.json();
    INFO(j.dump(1));
    REQUIRE(j.size() == 2);
    std::map<int, uint64_t> count;
    for (const auto& row : j) count[row["xid"].get<int>()] += row["count"].get<uint64_t>();
    CHECK(count == std::map<int, uint64_t>{{48, 2}, {79, 2}});
}
