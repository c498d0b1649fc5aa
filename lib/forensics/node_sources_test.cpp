#include "forensics/node_sources.hpp"

#include <fcntl.h>
#include <sys/stat.h>

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
    test::LokiDouble loki;
    loki::Endpoint ep;
    ep.url = loki.url();
    loki::Client c(ep);
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

TEST_CASE("jobtrail node from Loki: DCGM events on the job's GPU, in time order with the kernel's",
          "[forensics][cli][double]") {
    test::LokiDouble loki;
    loki::Endpoint ep;
    ep.url = loki.url();
    loki::Client c(ep);
    const int64_t t = realtime_ns() - 3600 * kSecond;
    std::vector<loki::Stream> streams(3);
    streams[0].labels = {{"job", "slurm-prolog-epilog"}, {"node", "gpu01"}, {"job_id", "7"}};
    streams[0].entries = {{t, "prolog meta user=alice", {}},
                          {t + 1, "prolog device kind=gpu index=0 bdf=0000:18:00.0", {}},
                          {t + 300 * kSecond, "epilog end status=0 duration_ms=1", {}}};
    streams[1].labels = {{"job", "kmsg"}, {"node", "gpu01"}};
    streams[1].entries = {{t + 50 * kSecond, kXidOn18, {}}};
    // DCGM's events before and after the kernel's, on GPU 0 by the entries' structured metadata.
    streams[2].labels = {{"job", "dcgm"}, {"node", "gpu01"}};
    const std::vector<std::pair<std::string, std::string>> gpu0 = {{"gpu", "0"}, {"pci_bdf", "00000000:18:00.0"}};
    streams[2].entries = {{t + 40 * kSecond, "Thermal violation on GPU 0: 95 C", gpu0},
                          {t + 60 * kSecond, "XID 79 on GPU 0", gpu0}};
    REQUIRE(c.push(loki::encode_push(streams, true)).status == 204);

    NodeView v("gpu01");
    CHECK(node_from_loki(c, Scope{}, "gpu01", t - 1000 * kSecond, realtime_ns(), {}, v).empty());
    REQUIRE(v.events().size() == 3);
    CHECK(v.events()[0].ts_ns == t + 40 * kSecond);
    CHECK(v.events()[0].source == "dcgm");
    CHECK(v.events()[1].ts_ns == t + 50 * kSecond);
    CHECK(v.events()[1].source == "kernel");
    CHECK(v.events()[2].ts_ns == t + 60 * kSecond);
    CHECK(v.events()[2].source == "dcgm");
    for (const auto& e : v.events()) {
        CHECK(e.basis == "device");
        CHECK(e.jobs == std::vector<std::string>{"7"});
        CHECK(e.device == "GPU 0 (0000:18:00.0)");
    }
}

TEST_CASE(
    "jobtrail node from Loki without --cluster: a node in two clusters' records shows the first one's and names both",
    "[forensics][cli][double]") {
    test::LokiDouble loki;
    loki::Endpoint ep;
    ep.url = loki.url();
    loki::Client c(ep);
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
