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
