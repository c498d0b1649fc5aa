#include "collector/kernel_snapshot.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "collector/session.hpp"
#include "collector_job.hpp"
#include "common/fs.hpp"
#include "common/time.hpp"
#include "joblog/format.hpp"
#include "kmsg/boot_clock.hpp"
#include "kmsg/record.hpp"
#include "kmsgfs_mount.hpp"
#include "node/job_state.hpp"

using namespace jobtrail;
using namespace jobtrail::collector;

TEST_CASE("a long job's epilog stamps kernel lines now and keeps their kernel time in the line",
          "[collector][fixture]") {
    test::KmsgfsMount fs;
    test::TempDir dir;
    // The boot offset moved two hours back: records printed now read as two hours old, as an
    // Xid early in a 2.5 h job does when the epilog reads it.
    constexpr int64_t kTwoHours = 7200LL * 1'000'000'000;
    const int64_t offset = realtime_ns() - monotonic_ns();
    const int64_t shifted = offset - offset % 1000 - kTwoHours;
    std::filesystem::create_directories(dir.path() + "/state");
    std::ofstream(dir.path() + "/state/boot-offset", std::ios::trunc)
        << kmsg::BootClock::current_boot_id() << ' ' << shifted << '\n';
    std::ofstream(dir.path() + "/cfg.yaml")
        << "collector:\n  log_dir: " << dir.path() << "/log\n  state_dir: " << dir.path()
        << "/state\n  run_dir: " << dir.path() << "/run\n  kmsg: " << fs.kmsg() << "\n";
    // Three identical records in one microsecond.
    const std::string xid = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.";
    fs.ctl("4,5000000;" + xid + "\n SUBSYSTEM=pci\n4,5000000;" + xid + "\n4,5000000;" + xid + "\n");
    ::setenv("SLURM_JOB_ID", "777", 1);
    const int64_t before = realtime_ns();
    {
        Session s(Phase::kEpilog, dir.path() + "/cfg.yaml");
        events::Extractor ex;
        record_kernel_delta(s, ex);
    }
    ::unsetenv("SLURM_JOB_ID");
    const int64_t after = realtime_ns();

    std::ifstream in(dir.path() + "/log/epilog/777.log");
    std::vector<int64_t> stamps, kernel;
    int kernel_lines = 0;
    for (std::string raw; std::getline(in, raw);) {
        joblog::Line l;
        REQUIRE(joblog::parse_line(raw, l));
        if (!stamps.empty()) CHECK(l.ts_ns > stamps.back());
        stamps.push_back(l.ts_ns);
        if (l.tag == joblog::kKmsg || l.tag == joblog::kKmsgDict || l.tag == joblog::kEvent) {
            ++kernel_lines;
            // Within the epilog's run, not two hours back: Loki would drop it.
            CHECK(l.ts_ns >= before);
            CHECK(l.ts_ns <= after);
        }
        if (l.tag == joblog::kKmsg) {
            kmsg::Record r;
            kmsg::ParseError perr;
            CHECK(kmsg::parse_record(std::string(l.text), r, perr));  // still /dev/kmsg syntax
            CHECK(r.message == xid);
            const auto t = kmsg::header_line_time(l.text);
            REQUIRE(t);
            kernel.push_back(*t);
        }
    }
    CHECK(kernel_lines >= 6);  // 3 kmsg, 1 kmsg-dict, event, event[summary]
    REQUIRE(kernel.size() == 3);
    const int64_t want = shifted - shifted % 1000 + 5'000'000'000;
    CHECK(kernel[0] / 1000 == want / 1000);
    CHECK(kernel[0] < kernel[1]);  // one microsecond, three distinct times
    CHECK(kernel[1] < kernel[2]);
    CHECK(before - kernel[0] > kTwoHours - 60'000'000'000);
}

TEST_CASE("the epilog says an OOM kill is in this job's memory cgroup only when it is Slurm's and its user's",
          "[collector]") {
    events::Extractor ex;
    devices::Attributor a;
    a.upsert("4242", "1000", 100, 0, {}, "");
    const auto kill = [](uint64_t seq, const std::string& memcg, int pid, int uid) {
        kmsg::Record r;
        r.seq = seq;
        r.message = "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=" + memcg +
                    ",task_memcg=" + memcg + "/step_0/user/task_0,task=eat,pid=" + std::to_string(pid) +
                    ",uid=" + std::to_string(uid);
        kmsg::Record killed;
        killed.seq = seq + 1;
        killed.message = "Memory cgroup out of memory: Killed process " + std::to_string(pid) + " (eat) total-vm:1kB";
        return std::pair{r, killed};
    };
    const auto said = [&](const std::pair<kmsg::Record, kmsg::Record>& records) {
        EventTally t(ex);
        t.attribute_with(&a, "4242");
        t.add(records.first, 200);
        t.add(records.second, 201);
        REQUIRE(t.hits().size() == 1);
        return t.hits()[0].attribution;
    };
    CHECK(said(kill(1, "/system.slice/slurmstepd.scope/job_4242", 9, 1000)) == "in this job's memory cgroup");
    CHECK(said(kill(3, "/user.slice/user-1001.slice/user@1001.service/job_4242", 10, 1001)) ==
          "node-wide: not attributed: memory cgroup /user.slice/user-1001.slice/user@1001.service/job_4242 is not "
          "under Slurm's cgroup root (collector.slurm_cgroup_roots), so every job on the node then");
    CHECK(said(kill(5, "/system.slice/slurmstepd.scope/job_4242", 11, 1001)) ==
          "node-wide: not attributed: the kernel's uid=1001 is not job 4242's user (uid 1000), so every job on the "
          "node then");
}

namespace {

// The kernel text of each line with this tag, in order.
std::vector<std::string> kernel_texts(const test::CollectorJob& job, const std::string& phase, std::string_view tag) {
    std::vector<std::string> out;
    for (const auto& l : job.log(phase)) {
        if (l.tag != tag) continue;
        kmsg::Record r;
        kmsg::ParseError perr;
        REQUIRE(kmsg::parse_record(l.text, r, perr));
        out.push_back(r.message);
    }
    return out;
}

std::vector<std::string> texts(const test::CollectorJob& job, const std::string& phase, std::string_view tag) {
    std::vector<std::string> out;
    for (const auto& l : job.log(phase))
        if (l.tag == tag) out.push_back(l.text);
    return out;
}

void prolog(const test::CollectorJob& job) {
    Session s(Phase::kProlog, job.config());
    record_kernel_mark(s);
}

std::vector<EventHit> epilog(const test::CollectorJob& job) {
    Session s(Phase::kEpilog, job.config());
    events::Extractor ex;
    return record_kernel_delta(s, ex);
}

const std::string kXid79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.";

}  // namespace

TEST_CASE(
    "the prolog keeps the ring's newest records within their age as the job's context and marks where the job "
    "starts",
    "[collector][fixture]") {
    test::KmsgfsMount fs;
    // usec 1: a microsecond after boot, older than the 30 s kept on any machine up a minute; the others are now. The
    // newest is a printk continuation still open when the prolog reads (flags c then +).
    const std::string now = std::to_string(monotonic_ns() / 1000);
    fs.ctl("6,1;booted long ago\n6;before 1\n6;before 2\n6;before 3\n6," + now + ",c;before 4\n SUBSYSTEM=pci\n6," +
           now + ",+;, continued\n");
    {
        // The ring's last three records: the continuation's two fragments count as two.
        test::CollectorJob job("  kmsg: " + fs.kmsg() + "\n  kernel_context:\n    records: 3\n    max_age: 30s\n");
        prolog(job);
        CHECK(kernel_texts(job, "prolog", joblog::kKmsgContext) ==
              std::vector<std::string>{"before 3", "before 4, continued"});
        CHECK(texts(job, "prolog", joblog::kKmsgDict) == std::vector<std::string>{"SUBSYSTEM=pci"});
        CHECK(job.text("prolog", joblog::kMeta, "").find("kmsg_mark=6 kmsg_records_scanned=6 kmsg_context_records=2") ==
              0);
        CHECK(kernel_texts(job, "prolog", joblog::kKmsg).empty());  // before the job: context, not the job's
        // The mark, for the epilog: the next sequence number and this boot.
        const auto mark =
            node::parse_kmsg_mark(read_small_file(job.dir() + "/state/kmsg-marks/4242", 4096).value_or(""));
        REQUIRE(mark);
        CHECK(mark->next_seq == 6);
        CHECK(mark->boot_id == kmsg::BootClock::current_boot_id());
    }
    {
        test::CollectorJob job("  kmsg: " + fs.kmsg() + "\n  kernel_context:\n    records: 100\n    max_age: 30s\n");
        prolog(job);
        CHECK(kernel_texts(job, "prolog", joblog::kKmsgContext) ==
              std::vector<std::string>{"before 1", "before 2", "before 3", "before 4, continued"});
    }
    {
        test::CollectorJob job("  kmsg: " + fs.kmsg() + "\n  kernel_context:\n    records: 0\n");
        prolog(job);
        CHECK(kernel_texts(job, "prolog", joblog::kKmsgContext).empty());
        CHECK(job.text("prolog", joblog::kMeta, "").find("kmsg_mark=6 kmsg_records_scanned=6 kmsg_context_records=0") ==
              0);
    }
}

TEST_CASE("a prolog on an empty kernel ring marks sequence 0 so its epilog reads every record",
          "[collector][fixture]") {
    test::KmsgfsMount fs;
    test::CollectorJob job("  kmsg: " + fs.kmsg() + "\n");
    prolog(job);
    CHECK(job.text("prolog", joblog::kMeta, "").find("kmsg_mark=0 kmsg_records_scanned=0 kmsg_context_records=0") == 0);
    fs.ctl("6;first of the job\n");
    epilog(job);
    CHECK(kernel_texts(job, "epilog", joblog::kKmsg) == std::vector<std::string>{"first of the job"});
}

TEST_CASE("the epilog reads the kernel records from the prolog's mark on and summarises their events",
          "[collector][fixture]") {
    test::KmsgfsMount fs;
    test::CollectorJob job("  kmsg: " + fs.kmsg() + "\n");
    fs.ctl("6;an earlier job\n4;" + kXid79 + "\n");  // an earlier job's Xid: not this job's
    prolog(job);
    const std::string mark = job.dir() + "/state/kmsg-marks/4242";
    REQUIRE(std::filesystem::exists(mark));
    fs.ctl("6;during the job\n SUBSYSTEM=pci\n4;" + kXid79 +
           "\n3,0,c;NVRM: Xid (PCI:0000:3b:00): 13, pid=1, \n3,0,+;Graphics Exception\n");  // open at the end
    const auto hits = epilog(job);
    CHECK(kernel_texts(job, "epilog", joblog::kKmsg) ==
          std::vector<std::string>{"during the job", kXid79,
                                   "NVRM: Xid (PCI:0000:3b:00): 13, pid=1, Graphics Exception"});
    CHECK(texts(job, "epilog", joblog::kKmsgDict) == std::vector<std::string>{"SUBSYSTEM=pci"});
    CHECK(texts(job, "epilog", joblog::kKmsgLost).empty());  // nothing lost between the mark and the read
    REQUIRE(hits.size() == 2);
    CHECK(hits[0].event.xid == 79);
    CHECK(hits[0].first_seq == 3);
    CHECK(hits[1].event.xid == 13);
    CHECK(job.text("epilog", joblog::kEvent, "summary") ==
          "basis=\"mark seq=2\" kmsg_records=3 fatal=" +
              std::to_string(hits[0].event.severity == events::Severity::kFatal) +
              " error=" + std::to_string(hits[1].event.severity == events::Severity::kError) + " warning=0 info=0");
    CHECK(hits[0].event.severity == events::Severity::kFatal);
    CHECK_FALSE(std::filesystem::exists(mark));  // used once: a later job with this id starts afresh
}

TEST_CASE("a kernel ring past what the epilog holds for judging: every Xid counted once, before and past the bound",
          "[collector][fixture]") {
    // The epilog holds the job's records (up to 32 MiB) to judge them after its scan; a larger
    // ring (log_buf_len can be set so) is judged as it goes past that. An Xid before the bound
    // and two past it: each in the summary, none twice, none missing.
    test::KmsgfsMount fs(size_t{48} << 20);
    test::CollectorJob job("  kmsg: " + fs.kmsg() + "\n  kmsg_budget: 60s\n  max_log_bytes: 64KiB\n");
    prolog(job);
    const std::string filler(1000, 'f');
    std::string batch = "4;" + kXid79 + "\n";
    // 40,000 records of 1 KB: past the 32 MiB with room, however a record is reckoned.
    for (int i = 0; i < 40'000; ++i) {
        batch += "6;filler " + std::to_string(i) + " " + filler + "\n";
        if (batch.size() > (64 << 10)) {
            fs.ctl(batch);
            batch.clear();
        }
    }
    batch += "4;" + kXid79 + "\n3;NVRM: Xid (PCI:0000:3b:00): 13, pid=1, Graphics Exception\n";
    fs.ctl(batch);
    const auto hits = epilog(job);
    REQUIRE(hits.size() == 2);
    CHECK(hits[0].event.xid == 79);
    CHECK(hits[0].count == 2);
    CHECK(hits[1].event.xid == 13);
    CHECK(hits[1].count == 1);
    // Every record read: none left to a spent budget.
    CHECK(job.text("epilog", joblog::kEvent, "summary").find(" kmsg_records=40003 ") != std::string::npos);
}

TEST_CASE("the epilog says how many records the ring lost before it read them and from which sequence number",
          "[collector][fixture]") {
    test::KmsgfsMount fs;
    test::CollectorJob job("  kmsg: " + fs.kmsg() + "\n");
    fs.ctl("6;before\n");
    prolog(job);                                     // mark: seq 1
    fs.ctl("6;job 1\n6;job 2\n6;job 3\n!drop 3\n");  // seq 0..2 overwritten: 1 and 2 were the job's
    epilog(job);
    CHECK(texts(job, "epilog", joblog::kKmsgLost) ==
          std::vector<std::string>{"lost=2 reason=\"kernel ring wrapped before the epilog read it\" first_seq=1"});
    CHECK(kernel_texts(job, "epilog", joblog::kKmsg) == std::vector<std::string>{"job 3"});
    CHECK(job.text("epilog", joblog::kEvent, "summary").find("basis=\"mark seq=1\" kmsg_records=1 ") == 0);
}

TEST_CASE("a kmsg mark from another boot is set aside and the epilog reads the whole ring and says why",
          "[collector][fixture]") {
    test::KmsgfsMount fs;
    test::CollectorJob job("  kmsg: " + fs.kmsg() + "\n");
    node::KmsgMark m;
    m.boot_id = "00000000-0000-0000-0000-000000000000";
    m.next_seq = 100;  // of the old boot: would skip every record of this one
    m.start_ns = realtime_ns();
    std::filesystem::create_directories(job.dir() + "/state/kmsg-marks");
    std::ofstream(job.dir() + "/state/kmsg-marks/4242") << node::to_json(m);
    fs.ctl("6,1;after the reboot\n6;later\n");
    epilog(job);
    CHECK(kernel_texts(job, "epilog", joblog::kKmsg) == std::vector<std::string>{"after the reboot", "later"});
    CHECK(texts(job, "epilog", joblog::kJobtrail) ==
          std::vector<std::string>{
              "warning: kmsg mark is from another boot (node rebooted during the job); using the whole ring"});
    CHECK(texts(job, "epilog", joblog::kKmsgLost).empty());
    CHECK(job.text("epilog", joblog::kEvent, "summary").find("basis=\"whole ring (rebooted)\" kmsg_records=2 ") == 0);
}

TEST_CASE("without a kmsg mark the epilog reads the records from the job's start time on and says so",
          "[collector][fixture]") {
    test::KmsgfsMount fs;
    test::CollectorJob job("  kmsg: " + fs.kmsg() + "\n");
    node::JobMarker m;
    m.job_id = "4242";
    m.uid = "1000";
    m.start_ns = realtime_ns() - 10'000'000'000;  // ten seconds ago
    {
        Session s(Phase::kEpilog, job.config());
        REQUIRE(node::write_job_marker(s.config().collector.layout(), m).ok);
    }
    fs.ctl("6,1;long before the job\n6;during the job\n");
    epilog(job);
    CHECK(kernel_texts(job, "epilog", joblog::kKmsg) == std::vector<std::string>{"during the job"});
    const std::string basis = "job start time " + format_rfc3339_ns(m.start_ns);
    CHECK(texts(job, "epilog", joblog::kJobtrail) ==
          std::vector<std::string>{"warning: no kmsg mark for this job; using " + basis});
    CHECK(job.text("epilog", joblog::kEvent, "summary").find("basis=\"" + basis + "\" kmsg_records=1 ") == 0);
}

TEST_CASE("a prolog that cannot save its kmsg mark says why in the job log", "[collector][fixture]") {
    test::KmsgfsMount fs;
    fs.ctl("6;a record\n");
    {
        test::CollectorJob job("  kmsg: " + fs.kmsg() + "\n");
        std::filesystem::create_directories(job.dir() + "/state");
        std::ofstream(job.dir() + "/state/kmsg-marks") << "a file where the directory goes\n";
        prolog(job);
        const auto said = texts(job, "prolog", joblog::kJobtrail);
        REQUIRE(said.size() == 1);
        CHECK(said[0].rfind("error: cannot save kmsg mark: ", 0) == 0);
        CHECK(said[0].find(job.dir() + "/state/kmsg-marks") != std::string::npos);
    }
    {
        test::CollectorJob job("  kmsg: " + fs.kmsg() + "\n");
        std::filesystem::create_directories(job.dir() + "/state/kmsg-marks/4242/in-the-way");
        prolog(job);
        const auto said = texts(job, "prolog", joblog::kJobtrail);
        REQUIRE(said.size() == 1);
        CHECK(said[0].rfind("error: cannot save kmsg mark: ", 0) == 0);
    }
}

TEST_CASE(
    "the epilog blames each GPU event on the job that held the GPU: this job or one running beside it or one "
    "ended",
    "[collector][fixture]") {
    test::KmsgfsMount fs;
    test::CollectorJob job("  kmsg: " + fs.kmsg() + "\n");
    const auto marker = [](const std::string& id, const std::string& bdf, int index) {
        node::JobMarker m;
        m.job_id = id;
        m.uid = "1000";
        m.start_ns = realtime_ns() - 60'000'000'000;
        node::JobDevice d;
        d.kind = "gpu";
        d.index = index;
        d.bdf = bdf;
        m.devices.push_back(d);
        return m;
    };
    {
        Session s(Phase::kProlog, job.config());
        const auto layout = s.config().collector.layout();
        REQUIRE(node::write_job_marker(layout, marker("4242", "0000:3b:00.0", 0)).ok);
        REQUIRE(node::write_job_marker(layout, marker("4243", "0000:86:00.0", 1)).ok);  // running beside it
        REQUIRE(node::write_job_marker(layout, marker("4240", "0000:af:00.0", 2)).ok);
        node::remove_job_state(layout, "4240", realtime_ns() - 1'000'000'000);  // ended a second ago
        record_kernel_mark(s);
    }
    fs.ctl(
        "4;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"
        "4;NVRM: Xid (PCI:0000:86:00): 79, pid=2, GPU has fallen off the bus.\n"
        "4," +
        std::to_string(monotonic_ns() / 1000 - 5'000'000) +  // 5 s ago: before 4240 ended
        ";NVRM: Xid (PCI:0000:af:00): 79, pid=3, GPU has fallen off the bus.\n");
    const auto hits = epilog(job);
    REQUIRE(hits.size() == 3);
    CHECK(hits[0].owner == "this_job");
    CHECK(hits[0].attribution == "on GPU 0 (0000:3b:00.0), owned by this job");
    CHECK(hits[1].owner == "other_job");
    CHECK(hits[1].owner_job == "4243");
    CHECK(hits[1].attribution == "on GPU 1 (0000:86:00.0), a GPU of another job (4243)");
    CHECK(hits[2].owner_job == "4240");
    const auto events = texts(job, "epilog", joblog::kEvent);
    REQUIRE(events.size() == 4);  // three events and the summary
    CHECK(events[0].find("owned by this job") != std::string::npos);
    CHECK(events[1].find("a GPU of another job (4243)") != std::string::npos);
}
