#include "forensics/node_sources.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "common/time.hpp"
#include "joblog/format.hpp"
#include "kmsg/record.hpp"
#include "kmsgfs_mount.hpp"
#include "loki/push.hpp"
#include "loki_double.hpp"

using namespace jobtrail;
using namespace jobtrail::forensics;

namespace {

constexpr int64_t kSecond = 1'000'000'000;
constexpr const char* kXidOn18 = "NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.";

loki::Endpoint endpoint_of(const std::string& url) {
    loki::Endpoint ep;
    ep.url = url;
    ep.timeout_ms = 60'000;  // some tests read tens of thousands of entries back: ASan on a loaded machine
    return ep;
}

// A Loki test double and a client of it.
struct Double {
    test::LokiDouble loki;
    loki::Client client{endpoint_of(loki.url())};
};

// A job log line holding a kernel record, as the collectors write it (usec: since boot, seq ms by default).
std::string kernel_line(int64_t stamped, std::string_view tag, uint8_t facility, uint64_t seq, int64_t at,
                        const std::string& message, uint64_t usec = 0) {
    kmsg::Record r;
    r.facility = facility;
    r.level = 3;
    r.seq = seq;
    r.usec = usec ? usec : seq * 1000;
    r.message = message;
    std::string out;
    joblog::append_line(out, stamped, tag, "", kmsg::format_header_line(r, at));
    return out;
}

std::string job_line(int64_t ts, std::string_view tag, std::string_view text) {
    std::string out;
    joblog::append_line(out, ts, tag, "", text);
    return out;
}

}  // namespace

TEST_CASE("jobtrail node --local: jobs from their logs, each kernel record once at its own time", "[forensics][cli]") {
    test::TempDir dir;
    node::Layout layout;
    layout.log_dir = dir.path();
    std::filesystem::create_directories(layout.job_log_dir(node::Phase::kProlog));
    std::filesystem::create_directories(layout.job_log_dir(node::Phase::kEpilog));
    const int64_t t = realtime_ns() - 3600 * kSecond;
    std::ofstream(layout.job_log(node::Phase::kProlog, "7"))
        << job_line(t, joblog::kMeta, "user=alice")
        << job_line(t + 1, joblog::kDevice, "kind=gpu index=0 bdf=0000:18:00.0 serial=S0")
        << kernel_line(t + 2, joblog::kKmsgContext, 0, 10, t - 100 * kSecond, "a record from before the job");
    // Each epilog holds the records since the one before: the same record in two of them.
    const std::string during = kernel_line(t + 200 * kSecond, joblog::kKmsg, 0, 11, t + 50 * kSecond, kXidOn18);
    std::ofstream(layout.job_log(node::Phase::kEpilog, "7"))
        << during << kernel_line(t + 200 * kSecond, joblog::kKmsg, 1, 12, t + 60 * kSecond, kXidOn18)
        << job_line(t + 300 * kSecond, joblog::kEnd, "status=0 duration_ms=1");
    std::ofstream(layout.job_log(node::Phase::kEpilog, "8")) << during;
    std::ofstream(dir.path() + "/prolog/not-a-job.log") << job_line(t, joblog::kMeta, "user=mallory");

    NodeView v("n1");
    CHECK(node_from_local(layout, v, t - 1000 * kSecond, realtime_ns()) == 3);
    REQUIRE(v.jobs().count("7"));
    CHECK(v.jobs().at("7").user == "alice");
    CHECK(v.jobs().at("7").end_ns == t + 300 * kSecond);
    // A user process's write to /dev/kmsg (facility 1) is no kernel event.
    REQUIRE(v.events().size() == 1);
    CHECK(v.events()[0].ts_ns == t + 50 * kSecond);
    CHECK(v.events()[0].jobs == std::vector<std::string>{"7"});
    CHECK(v.events()[0].basis == "device");
}

TEST_CASE("jobtrail node from Loki: the job lines the shipper sent and the node's kernel records",
          "[forensics][cli][double]") {
    Double d;
    loki::Client& c = d.client;
    const Scope schema;
    const int64_t t = realtime_ns() - 3600 * kSecond;
    std::vector<loki::Stream> streams(2);
    // The schema's default `job` values.
    streams[0].labels = {{"job", "slurm-prolog-epilog"}, {"node", "gpu01"}, {"job_id", "7"}};
    streams[0].entries = {{t, "prolog meta user=alice", {}},
                          {t + 1, "prolog device kind=gpu index=0 bdf=0000:18:00.0", {}},
                          {t + 2, "prolog stdout[10-site.sh] left out by the query", {}},
                          {t + 300 * kSecond, "epilog end status=0 duration_ms=1", {}}};
    streams[1].labels = {{"job", "kmsg"}, {"node", "gpu01"}};
    streams[1].entries = {{t + 50 * kSecond, kXidOn18, {}}};
    REQUIRE(c.push(loki::encode_push(streams, false)).status == 204);

    NodeView v("gpu01");
    CHECK(node_from_loki(c, schema, "gpu01", t - 1000 * kSecond, realtime_ns(), {}, v).empty());
    REQUIRE(v.jobs().count("7"));
    CHECK(v.jobs().at("7").user == "alice");
    CHECK(v.jobs().at("7").start_ns == t);
    CHECK(v.jobs().at("7").end_ns == t + 300 * kSecond);
    REQUIRE(v.events().size() == 1);
    CHECK(v.events()[0].jobs == std::vector<std::string>{"7"});
    CHECK(v.events()[0].device == "GPU 0 (0000:18:00.0)");
}

TEST_CASE("jobtrail node from Loki that cannot be reached says so for each query", "[forensics][cli]") {
    loki::Endpoint ep;
    ep.url = "http://127.0.0.1:1";
    loki::Client c(ep);
    NodeView v("gpu01");
    loki::QueryOptions once;
    once.max_attempts = 1;
    const int64_t now = realtime_ns();
    // The kernel records, the jobs' lines, the DCGM events.
    CHECK(node_from_loki(c, Scope{}, "gpu01", now - 3600 * kSecond, now, once, v).size() == 3);
    CHECK(v.jobs().empty());
}

TEST_CASE("jobtrail node --local: the window's edges and the jobs' two days before it are read to the nanosecond",
          "[forensics][cli]") {
    test::TempDir dir;
    node::Layout layout;
    layout.log_dir = dir.path();
    std::filesystem::create_directories(layout.job_log_dir(node::Phase::kProlog));
    std::filesystem::create_directories(layout.job_log_dir(node::Phase::kEpilog));
    const int64_t from = (realtime_ns() / kSecond - 3600) * kSecond, to = from + 1000 * kSecond;
    const int64_t job_from = from - 2 * 86'400 * kSecond;  // a job that started two days before still ran
    // Job 1: its first line exactly two days before the window, its end exactly at the window's end.
    std::ofstream(layout.job_log(node::Phase::kProlog, "1"))
        << job_line(job_from, joblog::kMeta, "user=alice")
        << kernel_line(from, joblog::kKmsgContext, 0, 10, from - 1, kXidOn18)  // a nanosecond before: not listed
        << kernel_line(from, joblog::kKmsgContext, 0, 11, from, kXidOn18);
    std::ofstream(layout.job_log(node::Phase::kEpilog, "1"))
        << job_line(to, joblog::kEnd, "status=0 duration_ms=1")
        << job_line(to + 1, joblog::kMeta, "user=mallory");  // after the window: not read
    // Job 2: its only line a nanosecond too early.
    std::ofstream(layout.job_log(node::Phase::kProlog, "2")) << job_line(job_from - 1, joblog::kMeta, "user=bob");
    // Jobs 3 and 4: lines in the window, but their logs last written at the lookback's edge and
    // a nanosecond before it.
    for (const char* id : {"3", "4"})
        std::ofstream(layout.job_log(node::Phase::kProlog, id)) << job_line(from, joblog::kMeta, "user=carol");
    const auto set_mtime = [](const std::string& path, int64_t ns) {
        const struct timespec ts[2] = {{ns / kSecond, ns % kSecond}, {ns / kSecond, ns % kSecond}};
        REQUIRE(::utimensat(AT_FDCWD, path.c_str(), ts, 0) == 0);
    };
    set_mtime(layout.job_log(node::Phase::kProlog, "3"), job_from);
    set_mtime(layout.job_log(node::Phase::kProlog, "4"), job_from - 1);

    NodeView v("n1");
    CHECK(node_from_local(layout, v, from, to) == 4);
    REQUIRE(v.jobs().count("1"));
    CHECK(v.jobs().at("1").user == "alice");
    CHECK(v.jobs().at("1").start_ns == job_from);
    CHECK(v.jobs().at("1").end_ns == to);
    CHECK(v.jobs().count("2") == 0);
    CHECK(v.jobs().count("3") == 1);
    CHECK(v.jobs().count("4") == 0);
    REQUIRE(v.events().size() == 1);
    CHECK(v.events()[0].ts_ns == from);
}

TEST_CASE("jobtrail node from Loki: DCGM events of two streams on the job's GPU, in time order with the kernel's",
          "[forensics][cli][double]") {
    Double d;
    loki::Client& c = d.client;
    const int64_t t = realtime_ns() - 3600 * kSecond;
    std::vector<loki::Stream> streams(4);
    streams[0].labels = {{"job", "slurm-prolog-epilog"}, {"node", "gpu01"}, {"job_id", "7"}};
    streams[0].entries = {{t, "prolog meta user=alice", {}},
                          {t + 1, "prolog device kind=gpu index=0 bdf=0000:18:00.0", {}},
                          {t + 300 * kSecond, "epilog end status=0 duration_ms=1", {}}};
    streams[1].labels = {{"job", "kmsg"}, {"node", "gpu01"}};
    streams[1].entries = {{t + 50 * kSecond, kXidOn18, {}}, {t + 70 * kSecond, kXidOn18, {}}};
    // DCGM's events before and after the kernel's, in two streams of the node, two of one instant
    // with the kernel's second (listed after it); on GPU 0 by the entries' structured metadata.
    const std::vector<std::pair<std::string, std::string>> gpu0 = {{"gpu", "0"}, {"pci_bdf", "00000000:18:00.0"}};
    streams[2].labels = {{"job", "dcgm"}, {"node", "gpu01"}, {"instance", "a"}};
    streams[2].entries = {{t + 40 * kSecond, "Thermal violation on GPU 0: 95 C", gpu0},
                          {t + 70 * kSecond, "Thermal violation on GPU 0: 96 C", gpu0},
                          {t + 70 * kSecond, "XID 79 on GPU 0", gpu0}};
    streams[3].labels = {{"job", "dcgm"}, {"node", "gpu01"}, {"instance", "b"}};
    streams[3].entries = {{t + 60 * kSecond, "XID 79 on GPU 0", gpu0}};
    REQUIRE(c.push(loki::encode_push(streams, true)).status == 204);

    NodeView v("gpu01");
    CHECK(node_from_loki(c, Scope{}, "gpu01", t - 1000 * kSecond, realtime_ns(), {}, v).empty());
    std::vector<std::string> listed;
    for (const auto& e : v.events())
        listed.push_back(std::to_string((e.ts_ns - t) / kSecond) + " " + e.source + " " + e.event.kind);
    CHECK(listed == std::vector<std::string>{"40 dcgm dcgm-thermal", "50 kernel xid", "60 dcgm xid", "70 kernel xid",
                                             "70 dcgm dcgm-thermal", "70 dcgm xid"});
    for (const auto& e : v.events()) {
        CHECK(e.basis == "device");
        CHECK(e.jobs == std::vector<std::string>{"7"});
        CHECK(e.device == "GPU 0 (0000:18:00.0)");
    }
}

TEST_CASE(
    "jobtrail node from Loki without --cluster: a node in two clusters' records shows the first one's and names both",
    "[forensics][cli][double]") {
    Double d;
    loki::Client& c = d.client;
    const int64_t t = realtime_ns() - 3600 * kSecond;
    std::vector<loki::Stream> streams(3);
    // The kernel's records are read first: cluster a is the node's.
    streams[0].labels = {{"job", "kmsg"}, {"node", "gpu01"}, {"cluster", "a"}};
    streams[0].entries = {{t + 50 * kSecond, kXidOn18, {}}};
    streams[1].labels = {{"job", "slurm-prolog-epilog"}, {"node", "gpu01"}, {"job_id", "7"}, {"cluster", "a"}};
    streams[1].entries = {{t, "prolog meta user=alice", {}}};
    streams[2].labels = {{"job", "slurm-prolog-epilog"}, {"node", "gpu01"}, {"job_id", "8"}, {"cluster", "b"}};
    streams[2].entries = {{t, "prolog meta user=bob", {}}};
    REQUIRE(c.push(loki::encode_push(streams, false)).status == 204);

    NodeView v("gpu01");
    const auto errors = node_from_loki(c, Scope{}, "gpu01", t - 1000 * kSecond, realtime_ns(), {}, v);
    REQUIRE(errors.size() == 1);
    CHECK(errors[0] ==
          "node gpu01 is in the records of several clusters: a, b; only a's are shown: say which with --cluster NAME");
    CHECK(v.jobs().size() == 1);
    CHECK(v.jobs().count("7") == 1);
    REQUIRE(v.events().size() == 1);
    CHECK(v.events()[0].jobs == std::vector<std::string>{"7"});
}

TEST_CASE("jobtrail node --local: kernel records by their time across a reboot that restarted their numbers",
          "[forensics][cli]") {
    test::TempDir dir;
    node::Layout layout;
    layout.log_dir = dir.path();
    std::filesystem::create_directories(layout.job_log_dir(node::Phase::kEpilog));
    const int64_t t = realtime_ns() - 3600 * kSecond;
    const std::string xid_on_2a = "NVRM: Xid (PCI:0000:2a:00): 79, pid=1, GPU has fallen off the bus.";
    // Before the reboot: record 900, 900 s after that boot.
    std::ofstream(layout.job_log(node::Phase::kEpilog, "7"))
        << kernel_line(t + 100 * kSecond, joblog::kKmsg, 0, 900, t + 100 * kSecond, kXidOn18, 900'000'000);
    // After it the kernel numbers its records from 0 again: record 900 again, another one; and two
    // records of the same microsecond.
    std::ofstream(layout.job_log(node::Phase::kEpilog, "8"))
        << kernel_line(t + 400 * kSecond, joblog::kKmsg, 0, 5, t + 200 * kSecond, xid_on_2a, 5'000'000)
        << kernel_line(t + 400 * kSecond, joblog::kKmsg, 0, 6, t + 250 * kSecond, kXidOn18, 55'000'000)
        << kernel_line(t + 400 * kSecond, joblog::kKmsg, 0, 7, t + 250 * kSecond, xid_on_2a, 55'000'000)
        << kernel_line(t + 400 * kSecond, joblog::kKmsg, 0, 900, t + 300 * kSecond, xid_on_2a, 105'000'000);

    NodeView v("n1");
    CHECK(node_from_local(layout, v, t, realtime_ns()) == 2);
    std::vector<std::pair<int64_t, std::string>> listed;
    for (const auto& e : v.events()) listed.emplace_back(e.ts_ns - t, e.event.pci_bdf);
    CHECK(listed == std::vector<std::pair<int64_t, std::string>>{{100 * kSecond, "0000:18:00"},
                                                                 {200 * kSecond, "0000:2a:00"},
                                                                 {250 * kSecond, "0000:18:00"},
                                                                 {250 * kSecond, "0000:2a:00"},
                                                                 {300 * kSecond, "0000:2a:00"}});
}

TEST_CASE("jobtrail node from Loki without --cluster: of a node in many clusters' records, 16 others are named",
          "[forensics][cli][double]") {
    Double d;
    loki::Client& c = d.client;
    const int64_t t = realtime_ns() - 3600 * kSecond;
    std::vector<loki::Stream> streams(18);
    streams[0].labels = {{"job", "kmsg"}, {"node", "gpu01"}, {"cluster", "a"}};
    streams[0].entries = {{t + 50 * kSecond, kXidOn18, {}}};
    // 17 other clusters: b to r.
    for (int i = 1; i < 18; ++i) {
        streams[i].labels = {{"job", "slurm-prolog-epilog"},
                             {"node", "gpu01"},
                             {"job_id", std::to_string(i)},
                             {"cluster", std::string(1, static_cast<char>('a' + i))}};
        streams[i].entries = {{t + i, "prolog meta user=bob", {}}};
    }
    REQUIRE(c.push(loki::encode_push(streams, false)).status == 204);

    NodeView v("gpu01");
    const auto errors = node_from_loki(c, Scope{}, "gpu01", t - 1000 * kSecond, realtime_ns(), {}, v);
    REQUIRE(errors.size() == 1);
    const std::string head = "node gpu01 is in the records of several clusters: a, ";
    REQUIRE(errors[0].substr(0, head.size()) == head);
    const std::string names = errors[0].substr(head.size(), errors[0].find(';') - head.size());
    // Each a single letter of b to r, 16 of them.
    CHECK(names.size() == 16 * 3 - 2);
    CHECK(std::count(names.begin(), names.end(), ',') == 15);
    CHECK(v.jobs().empty());
}

TEST_CASE(
    "jobtrail node from Loki: kernel events of days apart are listed oldest first, those of one instant in "
    "the order sent",
    "[forensics][cli][double]") {
    Double d;
    loki::Client& c = d.client;
    const int64_t now = realtime_ns();
    const std::string xid_on_2a = "NVRM: Xid (PCI:0000:2a:00): 79, pid=1, GPU has fallen off the bus.";
    std::vector<loki::Stream> streams(1);
    // A day apart: in two of the pieces asked for newest first.
    streams[0].labels = {{"job", "kmsg"}, {"node", "gpu01"}};
    streams[0].entries = {{now - 30 * 3600 * kSecond, kXidOn18, {}},
                          {now - 3600 * kSecond, kXidOn18, {}},
                          {now - 3600 * kSecond, xid_on_2a, {}}};
    REQUIRE(c.push(loki::encode_push(streams, false)).status == 204);

    NodeView v("gpu01");
    CHECK(node_from_loki(c, Scope{}, "gpu01", now - 3 * 86'400 * kSecond, now, {}, v).empty());
    // Every day of the window looked through: no limit said.
    CHECK_FALSE(v.json(now - 3 * 86'400 * kSecond, now, "loki").contains("not_looked_before"));
    std::vector<std::pair<int64_t, std::string>> listed;
    for (const auto& e : v.events()) listed.emplace_back(now - e.ts_ns, e.event.pci_bdf);
    CHECK(listed == std::vector<std::pair<int64_t, std::string>>{{30 * 3600 * kSecond, "0000:18:00"},
                                                                 {3600 * kSecond, "0000:18:00"},
                                                                 {3600 * kSecond, "0000:2a:00"}});
}

namespace {

// n kernel records of the node's stream at `at` + i steps (Xids on GPU 18 unless said).
void push_xids(loki::Client& c, int64_t at, size_t n, int64_t step_ns, const std::string& message = kXidOn18) {
    std::vector<loki::Stream> streams(1);
    streams[0].labels = {{"job", "kmsg"}, {"node", "gpu01"}};
    for (size_t i = 0; i < n; ++i) streams[0].entries.push_back({at + static_cast<int64_t>(i) * step_ns, message, {}});
    const auto r = c.push(loki::encode_push(streams, false));
    INFO(r.body);
    REQUIRE(r.status == 204);
}

}  // namespace

TEST_CASE("jobtrail node from Loki: a flood of older Xids leaves the newest listed and counts the rest once",
          "[forensics][cli][double]") {
    Double d;
    loki::Client& c = d.client;
    const int64_t to = realtime_ns(), from = to - 3 * 86'400 * kSecond;
    const size_t flood = 2 * NodeView::kMaxEvents - 1;
    // The day before the newest a flood of Xids on GPU 18; the newest day holds one Xid on GPU 2a.
    const int64_t first = to - 50 * 3600 * kSecond;
    push_xids(c, first, flood, 1'000'000);
    std::vector<loki::Stream> newest(1);
    newest[0].labels = {{"job", "kmsg"}, {"node", "gpu01"}};
    newest[0].entries = {
        {to - 3600 * kSecond, "NVRM: Xid (PCI:0000:2a:00): 79, pid=1, GPU has fallen off the bus.", {}}};
    REQUIRE(c.push(loki::encode_push(newest, false)).status == 204);

    NodeView v("gpu01");
    CHECK(node_from_loki(c, Scope{}, "gpu01", from, to, {}, v).empty());
    REQUIRE(v.events().size() == NodeView::kMaxEvents);
    CHECK(v.events().back().ts_ns == to - 3600 * kSecond);
    CHECK(v.events().back().event.pci_bdf == "0000:2a:00");
    // The flood's newest kMaxEvents - 1 listed before it, the others counted once.
    CHECK(v.events().front().ts_ns == first + static_cast<int64_t>(NodeView::kMaxEvents) * 1'000'000);
    CHECK(v.json(from, to, "loki")["events_not_listed"] == NodeView::kMaxEvents);
}

TEST_CASE("jobtrail node from Loki: a day that fills the view is the last asked for, and the listing says so",
          "[forensics][cli][double]") {
    Double d;
    loki::Client& c = d.client;
    const int64_t to = realtime_ns(), from = to - 3 * 86'400 * kSecond;
    // The day before the newest: one Xid. The newest day: exactly the view's events.
    push_xids(c, to - 30 * 3600 * kSecond, 1, 1);
    push_xids(c, to - 20 * 3600 * kSecond, NodeView::kMaxEvents, 1'000'000);

    NodeView v("gpu01");
    CHECK(node_from_loki(c, Scope{}, "gpu01", from, to, {}, v).empty());
    CHECK(v.events().size() == NodeView::kMaxEvents);
    CHECK(v.events().front().ts_ns == to - 20 * 3600 * kSecond);
    const auto j = v.json(from, to, "loki");
    CHECK(j["events_not_listed"] == 0);
    CHECK(j["not_looked_before"] == format_rfc3339_ns(to - 86'400 * kSecond));
}

TEST_CASE("jobtrail node from Loki: past the view's limit the newest DCGM events are listed, the older one counted",
          "[forensics][cli][double]") {
    Double d;
    loki::Client& c = d.client;
    const int64_t to = realtime_ns(), from = to - 3600 * kSecond;
    std::vector<loki::Stream> streams(1);
    streams[0].labels = {{"job", "dcgm"}, {"node", "gpu01"}};
    for (size_t i = 0; i <= NodeView::kMaxEvents; ++i)
        streams[0].entries.push_back({from + static_cast<int64_t>(i) * 1'000'000, "XID 79 on GPU 0", {}});
    REQUIRE(c.push(loki::encode_push(streams, false)).status == 204);

    NodeView v("gpu01");
    CHECK(node_from_loki(c, Scope{}, "gpu01", from, to, {}, v).empty());
    REQUIRE(v.events().size() == NodeView::kMaxEvents);
    CHECK(v.events().front().ts_ns == from + 1'000'000);
    CHECK(v.json(from, to, "loki")["events_not_listed"] == 1);
}

TEST_CASE("jobtrail node from Loki: a day of kernel lines that are no event does not stop the older days being read",
          "[forensics][cli][double]") {
    Double d;
    loki::Client& c = d.client;
    const int64_t to = realtime_ns(), from = to - 3 * 86'400 * kSecond;
    // The day before the newest: an Xid. The newest day: as many lines as the view's events, none one.
    push_xids(c, to - 30 * 3600 * kSecond, 1, 1);
    push_xids(c, to - 20 * 3600 * kSecond, NodeView::kMaxEvents, 1'000'000, "usb 1-1: new high-speed USB device");

    NodeView v("gpu01");
    CHECK(node_from_loki(c, Scope{}, "gpu01", from, to, {}, v).empty());
    REQUIRE(v.events().size() == 1);
    CHECK(v.events()[0].ts_ns == to - 30 * 3600 * kSecond);
    CHECK_FALSE(v.json(from, to, "loki").contains("not_looked_before"));
}
