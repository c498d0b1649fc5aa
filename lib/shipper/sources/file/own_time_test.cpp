// Lines that carry their own stamp (NCCL, CRI): Loki keeps one entry per (stream, time, line),
// so lines of one stamp each get their own nanosecond, the same after any restart.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <set>

#include "shipper/sources/file/file_source.hpp"
#include "temp_dir.hpp"

using namespace jobtrail::shipper;

namespace {

struct Files {
    jobtrail::test::TempDir dir;
    Metrics m;
    FileSourceConfig cfg;
    nlohmann::json saved;  // the checkpoint the pipeline would have written
    std::string path;
    explicit Files(LineFormat format) {
        ::mkdir((dir.path() + "/nccl").c_str(), 0755);
        ::mkdir((dir.path() + "/nccl/42").c_str(), 0755);
        cfg = {"t", {dir.path() + "/nccl/*/*.log"}, "test", format, {}};
        path = dir.path() + "/nccl/42/0.gpu01.77.log";
    }
    void append(const std::string& text) const { std::ofstream(path, std::ios::app) << text; }
    // One shipper life: restored from the last checkpoint, polled with `budget` bytes a pass
    // until it has `want` lines (0: all there are), its checkpoint kept.
    std::vector<Event> life(size_t want = 0, size_t budget = 1 << 20) {
        FileSource s(cfg, {.node = {"c", "n"}, .max_line = 1024, .idle_ms = 100000, .scan_interval_ms = 0}, m);
        s.restore(saved);
        std::vector<Event> ev;
        for (int i = 0; i < 10000 && (want == 0 || ev.size() < want); ++i)
            if (!s.poll(ev, budget) && want == 0) break;
        saved = s.checkpoint();
        return ev;
    }
};

std::vector<int64_t> times(const std::vector<Event>& ev) {
    std::vector<int64_t> t;
    for (const auto& e : ev) t.push_back(e.ts_ns);
    return t;
}

const std::string kNcclLine = "[2026-11-29T21:52:22.146801+0000] gpu01:77:80 [0] NCCL INFO Channel 00 : 0[0] -> 1[1]\n";
constexpr int64_t kNcclStamp = 1795989142146801000;

}  // namespace

TEST_CASE("eight identical NCCL lines of one microsecond get eight times inside it", "[shipper]") {
    Files f(LineFormat::kNccl);
    for (int i = 0; i < 8; ++i) f.append(kNcclLine);
    f.append("[2026-11-29T21:52:22.146802+0000] gpu01:77:80 [0] NCCL INFO next microsecond\n");
    const auto ev = f.life();
    REQUIRE(ev.size() == 9);
    const auto t = times(ev);
    for (int i = 0; i < 8; ++i) CHECK(t[i] == kNcclStamp + i);
    CHECK(t[8] == kNcclStamp + 1000);  // a new stamp starts at its own microsecond
    CHECK(std::set<int64_t>(t.begin(), t.end()).size() == 9);
}

TEST_CASE("a restart in the middle of a run of one stamp gives its lines the same times again", "[shipper]") {
    Files once(LineFormat::kNccl), split(LineFormat::kNccl), appended(LineFormat::kNccl);
    for (auto* f : {&once, &split}) {
        f->append("[2026-11-29T21:52:22.146800+0000] gpu01:77:80 [0] NCCL INFO before\n");
        for (int i = 0; i < 8; ++i) f->append(kNcclLine);
    }
    const auto whole = times(once.life());
    REQUIRE(whole.size() == 9);
    // Read a few lines at a time (the pass budget cuts the run), restarted from the checkpoint
    // after each few: the lines after each restart continue the count.
    std::vector<int64_t> parts;
    for (int life = 0; life < 6 && parts.size() < 9; ++life) {
        const auto t = times(split.life(parts.size() + 2 < 9 ? 2 : 0, 1));
        parts.insert(parts.end(), t.begin(), t.end());
    }
    CHECK(parts == whole);
    // The shipper stopped after four of them were written, the rest written while it was down.
    appended.append("[2026-11-29T21:52:22.146800+0000] gpu01:77:80 [0] NCCL INFO before\n");
    for (int i = 0; i < 4; ++i) appended.append(kNcclLine);
    auto t = times(appended.life());
    for (int i = 0; i < 4; ++i) appended.append(kNcclLine);
    const auto rest = times(appended.life());
    t.insert(t.end(), rest.begin(), rest.end());
    CHECK(t == whole);
}

TEST_CASE("a file put in place of a saved one does not go on with the old file's count", "[shipper]") {
    Files f(LineFormat::kNccl);
    for (int i = 0; i < 3; ++i) f.append(kNcclLine);
    REQUIRE(f.life().size() == 3);
    // Rewritten from its start (same inode, other content): a new file, its lines counted anew.
    std::ofstream(f.path, std::ios::trunc) << "[2026-11-29T21:52:22.146801+0000] gpu01:77:81 [0] NCCL INFO other\n"
                                           << kNcclLine << kNcclLine << kNcclLine << kNcclLine;
    const auto t = times(f.life());
    REQUIRE(t.size() == 5);
    for (int i = 0; i < 5; ++i) CHECK(t[i] == kNcclStamp + i);
}

TEST_CASE("CRI lines a runtime stamped alike get their own nanoseconds, the same after a restart", "[shipper]") {
    Files f(LineFormat::kCri);
    const std::string line = "2026-11-29T21:52:22.146801327Z stdout F step 10 loss 0.5\n";
    for (int i = 0; i < 3; ++i) f.append(line);
    auto t = times(f.life());
    for (int i = 0; i < 3; ++i) f.append(line);
    const auto rest = times(f.life());
    t.insert(t.end(), rest.begin(), rest.end());
    REQUIRE(t.size() == 6);
    for (int i = 0; i < 6; ++i) CHECK(t[i] == 1795989142146801327 + i);
}
