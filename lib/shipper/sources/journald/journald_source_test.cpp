#include "shipper/sources/journald/journald_source.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "common/time.hpp"
#include "skip.hpp"
#include "temp_dir.hpp"

using namespace jobtrail::shipper;

namespace {

constexpr const char* kJournalRemote = "/lib/systemd/systemd-journal-remote";

struct Entry {
    int64_t usec;
    std::string unit, priority, message, pid;
};

// Real journal files, written by systemd's own journal-remote from export format: the reader
// under test is libsystemd's, on files like the ones journald rotates through.
void write_journal(const std::string& file, const std::vector<Entry>& entries) {
    std::string exp;
    for (const auto& e : entries) {
        exp += "__REALTIME_TIMESTAMP=" + std::to_string(e.usec) + "\n__MONOTONIC_TIMESTAMP=" + std::to_string(e.usec) +
               "\n_BOOT_ID=0123456789abcdef0123456789abcdef\n_SYSTEMD_UNIT=" + e.unit + "\nPRIORITY=" + e.priority +
               "\n_PID=" + e.pid + "\nMESSAGE=" + e.message + "\n\n";
    }
    const std::string cmd = std::string(kJournalRemote) + " -o " + file + " - 2>/dev/null";
    FILE* p = ::popen(cmd.c_str(), "w");
    REQUIRE(p != nullptr);
    std::fwrite(exp.data(), 1, exp.size(), p);
    REQUIRE(::pclose(p) == 0);
}

// Where journals cannot be written or read, the tests are reported as skipped (a failure in CI).
bool journal_testable() {
    return JournaldSource::available() && ::access(kJournalRemote, X_OK) == 0;
}
constexpr const char* kNoJournal =
    "no libsystemd in this build or no /lib/systemd/systemd-journal-remote (apt install systemd-journal-remote)";

std::vector<Event> read_all(JournaldSource& s) {
    std::vector<Event> out;
    while (s.poll(out, 1 << 20)) {
    }
    return out;
}

}  // namespace

TEST_CASE("journald: unit filter, labels, exact timestamps, resume from the cursor", "[shipper]") {
    if (!journal_testable()) JOBTRAIL_SKIP(kNoJournal);
    jobtrail::test::TempDir dir;
    const int64_t now = jobtrail::realtime_ns() / 1000;
    write_journal(dir.path() + "/a.journal", {{now - 3'000'000, "slurmd.service", "3", "error: job 4242 failed", "77"},
                                              {now - 2'000'000, "cron.service", "6", "not ours", "1"},
                                              {now - 1'000'000, "slurmd.service", "6", "launch task 4242.0", "77"}});
    jobtrail::shipper::JournaldConfig cfg;
    cfg.units = {"slurmd.service"};
    cfg.directory = dir.path();
    Metrics m;
    nlohmann::json saved;
    {
        JournaldSource s(cfg, {"c1", "gpu01"}, 256 << 10, m);
        const auto ev = read_all(s);
        REQUIRE(ev.size() == 2);
        CHECK(ev[0].line == "error: job 4242 failed");
        CHECK(ev[0].ts_ns == (now - 3'000'000) * 1000);
        CHECK(ev[0].labels().at("job") == "systemd-journal");
        CHECK(ev[0].labels().at("unit") == "slurmd.service");
        CHECK(ev[0].labels().at("priority") == "err");
        CHECK(ev[0].labels().at("service_name") == "slurmd");
        CHECK(ev[0].labels().at("node") == "gpu01");
        CHECK(ev[1].labels().at("priority") == "info");
        REQUIRE(ev[1].metadata.size() == 1);
        CHECK(ev[1].metadata[0] == std::make_pair(std::string("pid"), std::string("77")));
        saved = s.checkpoint();
    }
    // journald rotated to a new file while we were down: only what is new comes out.
    write_journal(dir.path() + "/b.journal", {{now - 500'000, "slurmd.service", "4", "after restart", "78"}});
    JournaldSource again(cfg, {"c1", "gpu01"}, 256 << 10, m);
    again.restore(saved);
    const auto ev = read_all(again);
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].line == "after restart");
    // And a file that appears while running is noticed.
    write_journal(dir.path() + "/c.journal", {{now - 100'000, "slurmd.service", "4", "live", "78"}});
    const auto live = read_all(again);
    REQUIRE(live.size() == 1);
    CHECK(live[0].line == "live");
}

TEST_CASE("journald: the first start goes back `since`, not to the beginning of time", "[shipper]") {
    if (!journal_testable()) JOBTRAIL_SKIP(kNoJournal);
    jobtrail::test::TempDir dir;
    const int64_t now = jobtrail::realtime_ns() / 1000;
    write_journal(dir.path() + "/a.journal", {{now - 48LL * 3600 * 1'000'000, "slurmd.service", "6", "old", "1"},
                                              {now - 60'000'000, "slurmd.service", "6", "recent", "1"}});
    jobtrail::shipper::JournaldConfig cfg;
    cfg.units = {};  // every unit
    cfg.directory = dir.path();
    cfg.since_ms = 3'600'000;
    Metrics m;
    JournaldSource s(cfg, {"c1", "gpu01"}, 256 << 10, m);
    const auto ev = read_all(s);
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].line == "recent");
}

TEST_CASE("journald: identical entries in one microsecond each keep their own time, the same after a restart",
          "[shipper]") {
    if (!journal_testable()) JOBTRAIL_SKIP(kNoJournal);
    jobtrail::test::TempDir dir;
    const int64_t us = jobtrail::realtime_ns() / 1000 - 1'000'000;
    // Loki keeps one entry per stream, time and line: three identical lines at journald's one
    // microsecond would be one.
    write_journal(dir.path() + "/a.journal", {{us, "slurmd.service", "3", "link down", "77"},
                                              {us, "slurmd.service", "3", "link down", "77"},
                                              {us, "slurmd.service", "3", "link down", "77"},
                                              {us + 1, "slurmd.service", "3", "link down", "77"}});
    jobtrail::shipper::JournaldConfig cfg;
    cfg.units = {"slurmd.service"};
    cfg.directory = dir.path();
    Metrics m;
    const std::vector<int64_t> want = {us * 1000, us * 1000 + 1, us * 1000 + 2, (us + 1) * 1000};
    {
        JournaldSource s(cfg, {"c1", "gpu01"}, 256 << 10, m);
        const auto ev = read_all(s);
        REQUIRE(ev.size() == 4);
        for (size_t i = 0; i < ev.size(); ++i) CHECK(ev[i].ts_ns == want[i]);
    }
    // Stopped after the first entry (one entry per poll), started again from its checkpoint:
    // the rest get the times they got above.
    nlohmann::json saved;
    {
        JournaldSource s(cfg, {"c1", "gpu01"}, 256 << 10, m);
        std::vector<Event> first;
        s.poll(first, 1);
        REQUIRE(first.size() == 1);
        CHECK(first[0].ts_ns == want[0]);
        saved = s.checkpoint();
    }
    JournaldSource again(cfg, {"c1", "gpu01"}, 256 << 10, m);
    again.restore(nlohmann::json::parse(saved.dump()));
    const auto rest = read_all(again);
    REQUIRE(rest.size() == 3);
    for (size_t i = 0; i < rest.size(); ++i) CHECK(rest[i].ts_ns == want[i + 1]);
}
