#include "collector/kernel_ring.hpp"

#include <catch2/catch.hpp>

#include "devices/attribution.hpp"
#include "events/extractor.hpp"
#include "kmsg/record.hpp"
#include "kmsgfs_mount.hpp"

using namespace jobtrail;
using namespace jobtrail::collector;

namespace {

kmsg::Record kernel_record(uint64_t seq, std::string message) {
    kmsg::Record r;
    r.level = 3;
    r.seq = seq;
    r.message = std::move(message);
    return r;
}

std::string xid(int code, const std::string& bus) {
    return "NVRM: Xid (PCI:" + bus + "): " + std::to_string(code) + ", pid=1, name=python, Ch 00000008";
}

}  // namespace

TEST_CASE("the epilog's event tally counts an event again only for the same kind rule code device and owner",
          "[collector]") {
    events::Extractor ex;
    EventTally t(ex);
    CHECK(t.add(kernel_record(1, xid(13, "0000:3b:00")), 100));
    CHECK(t.add(kernel_record(2, "NET: Registered PF_INET6 protocol family"), 101) == nullptr);
    CHECK(t.add(kernel_record(3, xid(13, "0000:3b:00")), 102));
    CHECK(t.add(kernel_record(4, xid(13, "0000:5e:00")), 103));
    CHECK(t.add(kernel_record(5, xid(79, "0000:3b:00")), 104));
    CHECK(t.add(kernel_record(6, xid(13, "0000:3b:00")), 105));
    REQUIRE(t.hits().size() == 3);
    CHECK(t.hits()[0].event.xid == 13);
    CHECK(t.hits()[0].event.pci_bdf == "0000:3b:00");
    CHECK(t.hits()[0].count == 3);
    CHECK(t.hits()[0].first_seq == 1);
    CHECK(t.hits()[0].first_ns == 100);
    CHECK(t.hits()[0].first_message == xid(13, "0000:3b:00"));
    CHECK(t.hits()[1].event.pci_bdf == "0000:5e:00");
    CHECK(t.hits()[1].count == 1);
    CHECK(t.hits()[1].first_seq == 4);
    CHECK(t.hits()[2].event.xid == 79);
    CHECK(t.hits()[2].count == 1);
    // Without an attributor no owner is said.
    CHECK(t.hits()[0].owner.empty());
    // Each severity counts its own occurrences only.
    CHECK(t.count(t.hits()[0].event.severity) == 4);
    CHECK(t.count(t.hits()[2].event.severity) == 1);
    CHECK(t.hits()[0].event.severity != t.hits()[2].event.severity);
    CHECK(t.count(events::Severity::kInfo) == 0);
}

TEST_CASE("the epilog's event tally keeps 10000 distinct events and counts those it has after that", "[collector]") {
    events::Extractor ex;
    EventTally t(ex);
    // One Xid code on 10000 distinct devices: 0000:00:00 .. 0000:27:0f.
    char bus[16];
    for (int i = 0; i < 10'000; ++i) {
        std::snprintf(bus, sizeof bus, "0000:%02x:%02x", i / 256, i % 256);
        REQUIRE(t.add(kernel_record(i, xid(13, bus)), i));
    }
    CHECK(t.hits().size() == 10'000);
    // The 10001st distinct one is not kept; one already kept still counts.
    CHECK(t.add(kernel_record(10'000, xid(13, "0000:ff:ff")), 10'000) == nullptr);
    CHECK(t.hits().size() == 10'000);
    CHECK(t.add(kernel_record(10'001, xid(13, "0000:00:05")), 10'001));
    CHECK(t.hits()[5].count == 2);
}

TEST_CASE("the epilog says whose GPU an event was on: this job's or another job's", "[collector]") {
    events::Extractor ex;
    devices::Attributor a;
    node::JobDevice mine{"gpu", 0, "0000:3b:00.0", "GPU-a", "1650"};
    node::JobDevice theirs{"gpu", 1, "0000:5e:00.0", "GPU-b", ""};
    a.upsert("4242", "1000", 100, 0, {mine}, "");
    a.upsert("4243", "1001", 100, 0, {theirs}, "");
    EventTally t(ex);
    t.attribute_with(&a, "4242");
    REQUIRE(t.add(kernel_record(1, xid(79, "0000:3b:00")), 200));
    REQUIRE(t.add(kernel_record(2, xid(79, "0000:5e:00")), 201));
    REQUIRE(t.add(kernel_record(3, xid(79, "0000:3b:00")), 202));
    REQUIRE(t.hits().size() == 2);
    CHECK(t.hits()[0].owner == "this_job");
    CHECK(t.hits()[0].owner_job == "4242");
    CHECK(t.hits()[0].attribution == "on GPU 0 (0000:3b:00.0, serial 1650), owned by this job");
    CHECK(t.hits()[0].count == 2);
    CHECK(t.hits()[1].owner == "other_job");
    CHECK(t.hits()[1].owner_job == "4243");
    CHECK(t.hits()[1].attribution == "on GPU 1 (0000:5e:00.0), a GPU of another job (4243)");
}

TEST_CASE("the epilog says an OOM kill in another job's memory cgroup is that job's", "[collector]") {
    events::Extractor ex;
    devices::Attributor a;
    a.upsert("4242", "1000", 100, 0, {}, "");
    a.upsert("4243", "1001", 100, 0, {}, "");
    EventTally t(ex);
    t.attribute_with(&a, "4242");
    CHECK_FALSE(t.add(kernel_record(1,
                                    "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
                                    "oom_memcg=/system.slice/slurmstepd.scope/job_4243,task_memcg=/system.slice/"
                                    "slurmstepd.scope/job_4243/step_0/user/task_0,task=eat,pid=12,uid=1001"),
                      200));
    REQUIRE(t.add(kernel_record(2, "Memory cgroup out of memory: Killed process 12 (eat) total-vm:1kB"), 201));
    REQUIRE(t.hits().size() == 1);
    CHECK(t.hits()[0].owner == "other_job");
    CHECK(t.hits()[0].owner_job == "4243");
    CHECK(t.hits()[0].attribution == "in job 4243's memory cgroup");
}

TEST_CASE("an event line says each field it has and none it has not", "[collector]") {
    EventHit h;
    h.event.kind = "sxid";
    h.event.rule = "sxid";
    h.event.severity = events::Severity::kError;
    h.event.xid = 12028;
    h.event.pci_bdf = "0000:05:00.0";
    h.event.meaning = "link error";
    h.event.action = "reset the switch";
    h.event.detail = "Link 32";
    h.count = 3;
    h.first_seq = 7;
    h.first_ns = 1'000'000'000;
    h.owner = "other_job";
    h.owner_job = "12";
    h.attribution = "on GPU 1 (0000:5e:00.0), a GPU of another job (12)";
    CHECK(describe_hit(h) ==
          "severity=error kind=sxid sxid=12028 pci_bdf=0000:05:00.0 count=3 first_seq=7 "
          "first_time=1970-01-01T00:00:01.000000000Z rule=sxid meaning=\"link error\" action=\"reset the switch\" "
          "detail=\"Link 32\" owner=other_job owner_job=12 attribution=\"on GPU 1 (0000:5e:00.0), a GPU of another "
          "job (12)\"");
    EventHit bare;
    bare.event.kind = "xid";
    bare.event.rule = "xid";
    bare.event.xid = 79;
    bare.count = 1;
    CHECK(describe_hit(bare) ==
          "severity=info kind=xid xid=79 count=1 first_seq=0 first_time=1970-01-01T00:00:00.000000000Z rule=xid");
    bare.event.xid = 0;
    bare.event.kind = "oom";
    bare.event.rule = "oom";
    bare.owner = "node";
    bare.attribution = "node-wide: every job on the node then";
    CHECK(describe_hit(bare) ==
          "severity=info kind=oom count=1 first_seq=0 first_time=1970-01-01T00:00:00.000000000Z rule=oom owner=node "
          "attribution=\"node-wide: every job on the node then\"");
}

TEST_CASE("a ring scan gives every record in order and every loss and stops at the ring's end",
          "[collector][fixture]") {
    test::KmsgfsMount fs;
    fs.ctl("6;first\n6;second\n");
    std::vector<std::pair<std::string, uint64_t>> got;
    std::vector<uint64_t> lost;
    const auto on_record = [&](std::string_view raw, uint64_t seq) { got.emplace_back(std::string(raw), seq); };
    const auto on_lost = [&](uint64_t n) { lost.push_back(n); };
    RingScan s = scan_ring(fs.kmsg(), 10'000, on_record, on_lost);
    CHECK(s.ok);
    CHECK(s.any);
    CHECK_FALSE(s.budget_exhausted);
    CHECK(s.records == 2);
    CHECK(s.lost == 0);
    REQUIRE(got.size() == 2);
    CHECK(got[0].first.find(";first\n") != std::string::npos);
    CHECK(got[1].first.find(";second\n") != std::string::npos);
    CHECK(got[1].second == got[0].second + 1);
    CHECK(s.last_seq == got[1].second);
    CHECK(lost.empty());
}

TEST_CASE("a ring scan that cannot open the ring says why and reads nothing", "[collector]") {
    bool called = false;
    RingScan s = scan_ring(
        "/nonexistent/kmsg", 10'000, [&](std::string_view, uint64_t) { called = true; },
        [&](uint64_t) { called = true; });
    CHECK_FALSE(s.ok);
    CHECK(s.error.find("/nonexistent/kmsg") != std::string::npos);
    CHECK_FALSE(s.any);
    CHECK_FALSE(called);
}

TEST_CASE("a ring scan with its time spent stops before the first record and says so", "[collector][fixture]") {
    test::KmsgfsMount fs;
    fs.ctl("6;first\n");
    int records = 0;
    RingScan s = scan_ring(
        fs.kmsg(), -1, [&](std::string_view, uint64_t) { ++records; }, [](uint64_t) {});  // spent before it began
    CHECK(s.ok);
    CHECK(s.budget_exhausted);
    CHECK(records == 0);
    CHECK(s.records == 0);
}
