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

TEST_CASE("journald: each entry's service priority pid and text as journald gave them or their defaults", "[shipper]") {
    if (!journal_testable()) JOBTRAIL_SKIP(kNoJournal);
    jobtrail::test::TempDir dir;
    const int64_t now = jobtrail::realtime_ns() / 1000 - 1'000'000;
    write_journal(dir.path() + "/a.journal", {{now, "slurmd", "0", "no suffix", "7"},
                                              {now + 1, "nvidia.persistenced.service", "7", "two dots", ""},
                                              {now + 2, "", "8", "no unit", "9"},
                                              {now + 3, "x.service", "12", "priority 12", "9"},
                                              {now + 4, "x.service", "/", "priority /", "9"},
                                              {now + 5, "x.service", "", "no priority", "9"},
                                              {now + 6, "x.service", "3", "", "9"},
                                              {now + 7, "x.service", "3", "0123456789abcdefTAIL", "9"}});
    jobtrail::shipper::JournaldConfig cfg;
    cfg.directory = dir.path();
    Metrics m;
    JournaldSource s(cfg, {"c1", "gpu01"}, 16, m);
    const auto ev = read_all(s);
    REQUIRE(ev.size() == 7);  // the entry without text is none
    const auto label = [](const Event& e, const std::string& k) {
        const auto l = e.labels();
        return l.count(k) ? l.at(k) : std::string("(none)");
    };
    CHECK(label(ev[0], "service_name") == "slurmd");
    CHECK(label(ev[0], "unit") == "slurmd");
    CHECK(label(ev[0], "priority") == "emerg");
    CHECK(label(ev[1], "service_name") == "nvidia.persistenced");
    CHECK(label(ev[1], "priority") == "debug");
    CHECK(ev[1].metadata.empty());  // no pid
    CHECK(label(ev[2], "unit") == "(none)");
    CHECK(label(ev[2], "service_name") == "systemd-journal");
    for (size_t i = 2; i < 6; ++i) {
        INFO(ev[i].line);
        CHECK(label(ev[i], "priority") == "info");  // not 0-7: journald's default
    }
    CHECK(ev[6].line == "0123456789abcdef");  // cut at max_line_bytes
}

TEST_CASE("journald: a pass stops once its byte budget is spent to the byte and the next pass goes on", "[shipper]") {
    if (!journal_testable()) JOBTRAIL_SKIP(kNoJournal);
    jobtrail::test::TempDir dir;
    const int64_t now = jobtrail::realtime_ns() / 1000 - 1'000'000;
    // Each entry costs its text and 64 bytes: 36 + 64 = 100.
    write_journal(dir.path() + "/a.journal", {{now, "x.service", "6", std::string(36, 'a'), "1"},
                                              {now + 1, "x.service", "6", std::string(36, 'b'), "1"},
                                              {now + 2, "x.service", "6", std::string(36, 'c'), "1"}});
    jobtrail::shipper::JournaldConfig cfg;
    cfg.directory = dir.path();
    Metrics m;
    JournaldSource s(cfg, {"c1", "gpu01"}, 256 << 10, m);
    std::vector<Event> out;
    CHECK(s.poll(out, 100));  // spent on the first: more to read
    CHECK(out.size() == 1);
    CHECK(s.poll(out, 101));  // past one entry's cost: a second and a third
    CHECK(out.size() == 3);
    CHECK_FALSE(s.poll(out, 1000));
    CHECK(out.size() == 3);
}

TEST_CASE("journald: a journal directory that cannot be opened is said once and not tried again at every pass",
          "[shipper]") {
    if (!journal_testable()) JOBTRAIL_SKIP(kNoJournal);
    jobtrail::test::TempDir dir;
    jobtrail::shipper::JournaldConfig cfg;
    cfg.directory = dir.path() + "/missing";
    Metrics m;
    std::vector<std::string> said;
    JournaldSource s(cfg, {"c1", "gpu01"}, 256 << 10, m,
                     Events([&](const InternalEvent& e) { said.push_back(e.name + ": " + e.message); }));
    std::vector<Event> out;
    CHECK_FALSE(s.poll(out, 1 << 20));
    REQUIRE(said.size() == 1);
    CHECK(said[0] == "open_failed: cannot open the journal in " + cfg.directory + ": No such file or directory");
    CHECK_FALSE(s.poll(out, 1 << 20));
    CHECK(said.size() == 1);
    CHECK(out.empty());
}

TEST_CASE("journald: a checkpoint with fields of the wrong type is not used", "[shipper]") {
    if (!journal_testable()) JOBTRAIL_SKIP(kNoJournal);
    jobtrail::test::TempDir dir;
    const int64_t now = jobtrail::realtime_ns() / 1000 - 1'000'000;
    write_journal(dir.path() + "/a.journal",
                  {{now, "x.service", "6", "one", "1"}, {now, "x.service", "6", "two", "1"}});
    jobtrail::shipper::JournaldConfig cfg;
    cfg.directory = dir.path();
    Metrics m;
    for (const auto& bad : {nlohmann::json{{"cursor", 7}, {"usec", now}, {"same_usec", 5u}},
                            nlohmann::json{{"usec", -1}, {"same_usec", "1"}}, nlohmann::json::array()}) {
        INFO(bad.dump());
        JournaldSource s(cfg, {"c1", "gpu01"}, 256 << 10, m);
        s.restore(bad);
        const auto ev = read_all(s);
        REQUIRE(ev.size() == 2);
        CHECK(ev[0].ts_ns == now * 1000);  // not counted on from a saved run of the same microsecond
        CHECK(ev[1].ts_ns == now * 1000 + 1);
    }
}
