#include "collector/kernel_snapshot.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "common/time.hpp"
#include "joblog/format.hpp"
#include "kmsg/record.hpp"
#include "kmsgfs_mount.hpp"

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
