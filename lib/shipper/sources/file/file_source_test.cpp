#include "shipper/sources/file/file_source.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/fsuid.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <thread>

#include "common/fs.hpp"
#include "node/nccl_file.hpp"
#include "shipper/sources/file/labels.hpp"
#include "skip.hpp"
#include "temp_dir.hpp"
#include "unmount.hpp"

using namespace jobtrail::shipper;

namespace {

struct Fixture {
    jobtrail::test::TempDir dir;
    Metrics m;
    jobtrail::shipper::FileSourceConfig cfg;
    Fixture(LineFormat format = LineFormat::kPlain, std::string sub = "logs") {
        for (size_t at = sub.find('/'); at != std::string::npos; at = sub.find('/', at + 1))
            ::mkdir((dir.path() + "/" + sub.substr(0, at)).c_str(), 0755);
        ::mkdir((dir.path() + "/" + sub).c_str(), 0755);
        cfg = {"t", {dir.path() + "/" + sub + "/*.log"}, "test", format, {}};
    }
    nlohmann::json saved;  // the checkpoint the pipeline would have written
    static FileSourceOptions options(Events events = {}, int64_t idle_ms = 100000) {
        return {.node = {"c", "n"},
                .max_line = 1024,
                .events = std::move(events),
                .idle_ms = idle_ms,
                .scan_interval_ms = 0};
    }
    std::unique_ptr<FileSource> source(int64_t idle_ms = 100000) {
        auto s = std::make_unique<FileSource>(cfg, options({}, idle_ms), m);
        s->restore(saved);
        return s;
    }
    std::vector<std::string> lines(FileSource& s) {
        std::vector<Event> ev;
        while (s.poll(ev, 1 << 20)) {
        }
        saved = s.checkpoint();
        std::vector<std::string> out;
        for (auto& e : ev) out.push_back(e.line);
        return out;
    }
    void append(const std::string& name, const std::string& text) {
        std::ofstream(dir.path() + "/logs/" + name, std::ios::app) << text;
    }
};

// Makes `name` in `dir` (with `make`, which returns 0 when it made the entry) in inode `ino`,
// freed just before. ext4 gives back the lowest free inode, but another process may free a lower
// one meanwhile: placeholders (named outside any glob) hold those until `ino` comes. False if it
// does not (a filesystem that does not reuse inodes, such as tmpfs).
bool make_in_inode(const std::string& dir, const std::string& name, ino_t ino,
                   const std::function<int(const char*)>& make) {
    std::vector<std::string> placeholders;
    bool made = false;
    for (int i = 0; i < 256 && !made; ++i) {
        const std::string p = dir + "/.inode-" + std::to_string(i);
        struct stat st {};
        if (make(p.c_str()) != 0 || ::lstat(p.c_str(), &st) != 0) break;
        if (st.st_ino == ino)
            made = ::rename(p.c_str(), (dir + "/" + name).c_str()) == 0;
        else
            placeholders.push_back(p);
    }
    for (const auto& p : placeholders) ::unlink(p.c_str());
    return made;
}

}  // namespace

TEST_CASE("file lines are read once, across restarts, and a partial line waits for its end", "[shipper]") {
    Fixture f;
    f.append("a.log", "one\ntwo\nthr");
    auto s = f.source();
    CHECK(f.lines(*s) == std::vector<std::string>{"one", "two"});
    f.append("a.log", "ee\n");
    CHECK(f.lines(*s) == std::vector<std::string>{"three"});
    s.reset();
    f.append("a.log", "four\n");
    auto again = f.source();  // restart: resumes after "three"
    CHECK(f.lines(*again) == std::vector<std::string>{"four"});
}

TEST_CASE("a file replaced between the scan's look at it and its open is read once, as the file it is", "[shipper]") {
    // A job's user renames another file over the name in that instant. The open finds another
    // inode than the scan saw: not taken then, but at the next scan as the file it is. Taken
    // under the inode the scan saw, it was taken again by the next scan: every line twice.
    Fixture f;
    f.append("a.log", "seen by the scan\n");
    f.append("b.tmp", "one\ntwo\n");  // outside the glob until renamed
    const std::string a = f.dir.path() + "/logs/a.log", b = f.dir.path() + "/logs/b.tmp";
    int swaps = 0;
    auto o = f.options();
    o.labeler = [&, contract = contract_labeler(LineFormat::kPlain, jobtrail::node::StreamKind::kOther)](
                    const std::string& path) {
        if (path == a && swaps++ == 0) REQUIRE(::rename(b.c_str(), a.c_str()) == 0);
        return contract(path);
    };
    FileSource s(f.cfg, std::move(o), f.m);
    s.restore(f.saved);
    std::vector<std::string> lines;
    for (int pass = 0; pass < 3; ++pass) {
        auto got = f.lines(s);
        lines.insert(lines.end(), got.begin(), got.end());
    }
    CHECK(swaps >= 1);
    CHECK(lines == std::vector<std::string>{"one", "two"});  // the first file is gone unread: deleted before its open
}

TEST_CASE("an idle last line without newline is shipped as it is", "[shipper]") {
    Fixture f;
    f.append("a.log", "no newline at the end");
    auto s = f.source(0);
    auto l = f.lines(*s);
    l = l.empty() ? f.lines(*s) : l;
    CHECK(l == std::vector<std::string>{"no newline at the end"});
}

TEST_CASE("rename rotation: the old file is finished, the new one read from its start", "[shipper]") {
    Fixture f;
    f.append("app.log", "1\n2\n");
    auto s = f.source();
    CHECK(f.lines(*s).size() == 2);
    {
        std::ofstream old(f.dir.path() + "/logs/app.log", std::ios::app);
        old << "3\n";  // written just before the rename
    }
    REQUIRE(::rename((f.dir.path() + "/logs/app.log").c_str(), (f.dir.path() + "/logs/app.log.1").c_str()) == 0);
    f.append("app.log", "4\n5\n");
    auto l = f.lines(*s);
    std::sort(l.begin(), l.end());
    CHECK(l == std::vector<std::string>{"3", "4", "5"});
}

TEST_CASE("copytruncate: a file shorter than our position starts over", "[shipper]") {
    Fixture f;
    f.append("app.log", "aaaa\nbbbb\n");
    auto s = f.source();
    CHECK(f.lines(*s).size() == 2);
    REQUIRE(::truncate((f.dir.path() + "/logs/app.log").c_str(), 0) == 0);
    f.append("app.log", "c\n");
    CHECK(f.lines(*s) == std::vector<std::string>{"c"});
}

TEST_CASE("long lines are cut with a marker, bad bytes stay visible", "[shipper]") {
    Fixture f;
    f.append("a.log", std::string(5000, 'x') + "\nnul\0here\xff\n" + std::string("ok\n"));
    std::string raw = std::string(5000, 'x') + "\n";
    raw += std::string("nul") + '\0' + "here\xff\n";
    std::ofstream(f.dir.path() + "/logs/b.log") << raw;
    auto s = f.source();
    auto l = f.lines(*s);
    bool cut = false, nul = false;
    for (auto& x : l) {
        cut |= x.find("[jobtrail: line truncated,") != std::string::npos && x.size() < 1200;
        nul |= x == "nul\\x00here\xef\xbf\xbd";
    }
    CHECK(cut);
    CHECK(nul);
}

TEST_CASE("job logs keep their own timestamps and get job_id and phase", "[shipper]") {
    Fixture f(LineFormat::kJoblog, "prolog");
    std::ofstream(f.dir.path() + "/prolog/4242.log") << "2026-11-29T21:52:22.146801327Z stdout[10-site.sh] hello\n"
                                                     << "not a job log line\n";
    auto s = f.source();
    std::vector<Event> ev;
    s->poll(ev, 1 << 20);
    REQUIRE(ev.size() == 2);
    CHECK(ev[0].ts_ns == 1795989142146801327);
    CHECK(ev[0].labels().at("job_id") == "4242");
    CHECK(ev[0].labels().at("job") == "test");
    CHECK(ev[0].line == "prolog stdout[10-site.sh] hello");
    // Its tag goes as structured metadata: {tag="stdout"} finds a job's script output in Loki.
    CHECK(ev[0].metadata == std::vector<std::pair<std::string, std::string>>{{"tag", "stdout"}});
    // A line that is none of ours is shipped as it is, with no tag.
    CHECK(ev[1].line == "not a job log line");
    CHECK(ev[1].metadata.empty());
}

TEST_CASE(
    "NCCL lines: timestamp with UTC offset, the step said once per file, the file's name only where the line lacks it",
    "[shipper]") {
    Fixture f(LineFormat::kNccl, "nccl");
    ::mkdir((f.dir.path() + "/nccl/77").c_str(), 0755);
    f.cfg.paths = {f.dir.path() + "/nccl/*/*.log"};
    std::ofstream(f.dir.path() + "/nccl/77/0.gpu01.1234.log")
        << "[2026-11-29T23:52:22.146801+0200] gpu01:1234:1234 [0] NCCL INFO Bootstrap\n"
        << "gpu01:1234:1240 [0] NCCL INFO without a stamp\n"
        << "[2026-11-29T23:52:22.146802+0200] a line the user printed\n"
        << "[2026-11-29T23:52:22.146803+0200] gpu01:12345:1 [0] another process's prefix\n";
    // A name that is not one of ours keeps its name on every line.
    std::ofstream(f.dir.path() + "/nccl/77/mine.log") << "gpu01:1234:1 [0] NCCL INFO x\n";
    auto s = f.source();
    std::vector<Event> ev;
    s->poll(ev, 1 << 20);
    REQUIRE(ev.size() == 5);
    std::sort(ev.begin(), ev.end(), [](const Event& a, const Event& b) { return a.line < b.line; });
    const Event* bootstrap = nullptr;
    for (const auto& e : ev)
        if (e.line.find("Bootstrap") != std::string::npos) bootstrap = &e;
    REQUIRE(bootstrap);
    CHECK(bootstrap->ts_ns == 1795989142146801000);  // 23:52+02:00 is 21:52Z
    CHECK(bootstrap->labels().at("job_id") == "77");
    // The step, which the line does not say (its prefix says host and pid, the rest of
    // <step>.<host>.<pid>.log), goes with the file's first line into the spool (the pipeline
    // puts it there), not on every line.
    CHECK(bootstrap->origin->metadata.empty());
    REQUIRE(bootstrap->origin->first_line_metadata.size() == 1);
    CHECK(bootstrap->origin->first_line_metadata[0] == std::make_pair(std::string("step"), std::string("0")));
    CHECK(bootstrap->origin->labels.count("file") == 0);  // never a label: it would multiply streams
    for (const auto& e : ev) {
        INFO(e.line);
        const bool ours = !e.origin->first_line_metadata.empty();
        if (ours && e.line.find("gpu01:1234:") != std::string::npos) {
            CHECK(e.metadata.empty());
            const auto o = jobtrail::node::nccl_line_origin(e.line);
            REQUIRE(o);
            CHECK(jobtrail::node::nccl_file_name(e.origin->first_line_metadata[0].second, o->host, o->pid) ==
                  "0.gpu01.1234.log");
        } else if (ours) {
            REQUIRE(e.metadata.size() == 1);
            CHECK(e.metadata[0] == std::make_pair(std::string("file"), std::string("0.gpu01.1234.log")));
        } else {
            REQUIRE(e.origin->metadata.size() == 1);
            CHECK(e.origin->metadata[0] == std::make_pair(std::string("file"), std::string("mine.log")));
            CHECK(e.metadata.empty());
        }
    }
}

TEST_CASE("CRI container logs: P pieces join their F line, timestamp and stream kept", "[shipper]") {
    Fixture f(LineFormat::kCri);
    f.append("pod.log",
             "2026-11-29T21:52:22.146801327Z stdout P first half \n"
             "2026-11-29T21:52:22.246801327Z stdout F second half\n"
             "2026-11-29T21:52:23.000000000+01:00 stderr F an error\n"
             "not a cri line\n");
    auto s = f.source();
    std::vector<Event> ev;
    s->poll(ev, 1 << 20);
    REQUIRE(ev.size() == 3);
    CHECK(ev[0].line == "first half second half");
    CHECK(ev[0].ts_ns == 1795989142246801327);  // the F line's time: when the line was complete
    REQUIRE(ev[0].metadata.size() == 1);
    CHECK(ev[0].metadata[0].second == "stdout");
    CHECK(ev[1].line == "an error");
    CHECK(ev[1].ts_ns == 1795989143000000000 - 3600'000'000'000);
    CHECK(ev[1].metadata[0].second == "stderr");
    CHECK(ev[2].line == "not a cri line");  // kept as it is rather than dropped
}

TEST_CASE("a job user's links, FIFOs and other owners' files are refused, counted, never read", "[shipper]") {
    // The job's NCCL directory belongs to its user (uid 65534 here); the tests run as root.
    Fixture f(LineFormat::kNccl, "nccl/42");
    const std::string jobdir = f.dir.path() + "/nccl/42";
    f.cfg.paths = {f.dir.path() + "/nccl/*/*.log"};
    REQUIRE(::chown(jobdir.c_str(), 65534, 65534) == 0);
    const std::string secret = f.dir.path() + "/secret";
    std::ofstream(secret) << "root:$6$secret-hash:19000:0:99999:7:::\n";
    REQUIRE(::chmod(secret.c_str(), 0600) == 0);
    auto own = [&](const std::string& name, const std::string& text) {
        const std::string p = jobdir + "/" + name;
        std::ofstream(p) << text;
        REQUIRE(::chown(p.c_str(), 65534, 65534) == 0);
    };
    own("0.n1.100.log", "mine\n");
    REQUIRE(::symlink(secret.c_str(), (jobdir + "/1.n1.101.log").c_str()) == 0);
    REQUIRE(::symlink("/dev/zero", (jobdir + "/2.n1.102.log").c_str()) == 0);
    REQUIRE(::mkfifo((jobdir + "/3.n1.103.log").c_str(), 0644) == 0);
    REQUIRE(::link(secret.c_str(), (jobdir + "/4.n1.104.log").c_str()) == 0);
    std::ofstream(jobdir + "/5.n1.105.log") << "root's file, not the user's\n";  // owned by root: fine
    own("6.n1.106.log", "");
    REQUIRE(::chown((jobdir + "/6.n1.106.log").c_str(), 1234, 1234) == 0);  // another user's
    std::vector<std::string> logged;
    const Events events([&](const InternalEvent& e) {
        CHECK(e.severity == Severity::kWarning);
        CHECK(e.component == "t");
        CHECK(e.name == "file_refused");
        logged.push_back(e.message);
    });
    FileSource s(f.cfg, f.options(events), f.m);
    std::vector<std::string> lines;
    for (int pass = 0; pass < 3; ++pass) {  // refusals are counted once, not once per pass
        std::vector<Event> ev;
        s.poll(ev, 1 << 20);
        for (auto& e : ev) lines.push_back(e.line);
    }
    std::sort(lines.begin(), lines.end());
    CHECK(lines == std::vector<std::string>{"mine", "root's file, not the user's"});
    CHECK(f.m.group<FileSourceMetrics>().files_refused.samples() ==
          std::map<jobtrail::metrics::Labels, uint64_t>{
              {{"symlink"}, 2}, {{"not_regular"}, 1}, {{"hard_link"}, 1}, {{"owner"}, 1}});
    REQUIRE(logged.size() == 5);
    CHECK(logged[0].rfind("not reading " + jobdir + "/", 0) == 0);
    const auto checkpoint = s.checkpoint().dump();
    CHECK(checkpoint.find("1.n1.101") == std::string::npos);
}

TEST_CASE("a FIFO refused once is not opened again at the next listings of its directory", "[shipper]") {
    // Each open of a FIFO for reading releases a writer blocked in open(2): a job's user could
    // time the shipper's scans by it, and the shipper would do the work of a refusal each scan.
    // inotify counts the opens (a writer thread released or not would depend on its scheduling).
    Fixture f(LineFormat::kNccl, "nccl/42");
    const std::string jobdir = f.dir.path() + "/nccl/42";
    f.cfg.paths = {f.dir.path() + "/nccl/*/*.log"};
    const std::string fifo = jobdir + "/3.n1.103.log";
    REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
    const jobtrail::Fd watch(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    REQUIRE(watch.valid());
    REQUIRE(::inotify_add_watch(watch.get(), fifo.c_str(), IN_OPEN) >= 0);
    auto opens = [&] {
        int n = 0;
        alignas(inotify_event) char buf[4096];
        for (ssize_t got; (got = ::read(watch.get(), buf, sizeof buf)) > 0;)
            for (char* p = buf; p < buf + got; p += sizeof(inotify_event) + reinterpret_cast<inotify_event*>(p)->len)
                n += (reinterpret_cast<inotify_event*>(p)->mask & IN_OPEN) != 0;
        return n;
    };
    const Events events([](const InternalEvent&) {});
    FileSource s(f.cfg, f.options(events), f.m);
    std::vector<Event> ev;
    s.poll(ev, 1 << 20);
    REQUIRE(f.m.group<FileSourceMetrics>().files_refused.value({"not_regular"}) == 1);
    REQUIRE(opens() == 1);  // the open that found it is no regular file
    for (int pass = 0; pass < 3; ++pass) {
        // A new file each time, so that the directory is listed again.
        std::ofstream(jobdir + "/" + std::to_string(pass) + ".n1.10" + std::to_string(pass) + ".log") << "x\n";
        s.poll(ev, 1 << 20);
    }
    CHECK(opens() == 0);
    CHECK(f.m.group<FileSourceMetrics>().files_refused.value({"not_regular"}) == 1);
    CHECK(ev.size() == 3);  // the three files' lines
}

TEST_CASE("a symlinked job directory is not followed", "[shipper]") {
    Fixture f(LineFormat::kNccl, "nccl/7");
    f.cfg.paths = {f.dir.path() + "/nccl/*/*.log"};
    ::mkdir((f.dir.path() + "/elsewhere").c_str(), 0755);
    std::ofstream(f.dir.path() + "/elsewhere/0.n.1.log") << "not this job's\n";
    REQUIRE(::symlink((f.dir.path() + "/elsewhere").c_str(), (f.dir.path() + "/nccl/8").c_str()) == 0);
    std::ofstream(f.dir.path() + "/nccl/7/0.n.2.log") << "this job's\n";
    auto s = f.source();
    CHECK(f.lines(*s) == std::vector<std::string>{"this job's"});
    CHECK(f.m.group<FileSourceMetrics>().files_refused.value({"symlink"}) == 1);
}

TEST_CASE("files past a source's limits are refused and counted once, the others read", "[shipper]") {
    Fixture f(LineFormat::kNccl, "nccl/9");
    f.cfg.paths = {f.dir.path() + "/nccl/*/*.log"};
    f.cfg.max_files_per_dir = 3;
    f.cfg.max_files = 4;
    ::mkdir((f.dir.path() + "/nccl/10").c_str(), 0755);
    for (int i = 0; i < 5; ++i) std::ofstream(f.dir.path() + "/nccl/9/" + std::to_string(i) + ".n.1.log") << "a\n";
    for (int i = 0; i < 2; ++i) std::ofstream(f.dir.path() + "/nccl/10/" + std::to_string(i) + ".n.1.log") << "b\n";
    std::vector<std::string> said;
    const Events events([&](const InternalEvent& e) { said.push_back(e.name + ": " + e.message); });
    FileSource s(f.cfg, f.options(events), f.m);
    std::vector<std::string> lines;
    for (int pass = 0; pass < 3; ++pass) {
        std::vector<Event> ev;
        s.poll(ev, 1 << 20);
        for (auto& e : ev) lines.push_back(e.line);
    }
    CHECK(lines.size() == 4);                                 // at most 3 of job 9's, 4 in all
    CHECK(std::count(lines.begin(), lines.end(), "a") <= 3);  // the directory's cap holds
    // Once each, not once per pass: the directory past its cap once (not read past it), the
    // file past the source's limit once.
    CHECK(f.m.group<FileSourceMetrics>().files_refused.value({"too_many_files_in_directory"}) == 1);
    CHECK(f.m.group<FileSourceMetrics>().files_refused.value({"too_many_files"}) == 1);
    REQUIRE(said.size() == 2);
    std::sort(said.begin(), said.end());
    CHECK(said[0].rfind("too_many_files: not reading 1 more files", 0) == 0);
    CHECK(said[1].rfind("too_many_files: not reading more files of " + f.dir.path() + "/nccl/9: over the limit of 3",
                        0) == 0);
}

namespace {
size_t open_fds() {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
}
}  // namespace

TEST_CASE("a source holds at most max_open_files descriptors, and every file is still read once", "[shipper]") {
    Fixture f(LineFormat::kNccl, "nccl/3");
    f.cfg.paths = {f.dir.path() + "/nccl/*/*.log"};
    f.cfg.max_open_files = 4;
    const std::string d = f.dir.path() + "/nccl/3/";
    for (int i = 0; i < 40; ++i) std::ofstream(d + std::to_string(i) + ".n.1.log") << "a" << i << "\n";
    size_t before = 0;  // with the source's own (its inotify descriptor): files' descriptors are counted
    size_t most = 0;
    auto drain = [&](FileSource& s) {
        std::vector<std::string> got;
        bool more = true;
        while (more) {
            std::vector<Event> ev;
            more = s.poll(ev, 1 << 20);
            most = std::max(most, open_fds() - before);
            for (auto& e : ev) got.push_back(e.line);
        }
        f.saved = s.checkpoint();
        std::sort(got.begin(), got.end());
        return got;
    };
    auto expect = [](const std::string& p) {
        std::vector<std::string> v;
        for (int i = 0; i < 40; ++i) v.push_back(p + std::to_string(i));
        std::sort(v.begin(), v.end());
        return v;
    };
    auto s = f.source();
    before = open_fds();
    CHECK(drain(*s) == expect("a"));
    for (int i = 0; i < 40; ++i) std::ofstream(d + std::to_string(i) + ".n.1.log", std::ios::app) << "b" << i << "\n";
    CHECK(drain(*s) == expect("b"));  // the closed ones opened again where they were
    s.reset();
    for (int i = 0; i < 40; ++i) std::ofstream(d + std::to_string(i) + ".n.1.log", std::ios::app) << "c" << i << "\n";
    auto again = f.source();  // and after a restart
    CHECK(drain(*again) == expect("c"));
    CHECK(most <= 4);
}

TEST_CASE("an idle file is closed, its position kept, and read on when it grows", "[shipper]") {
    Fixture f;
    f.cfg.idle_close_ms = 0;  // closed as soon as it is read to its end
    f.append("a.log", "one\n");
    f.append("b.log", "other\n");
    auto s = f.source();
    const size_t before = open_fds();  // the source's own descriptor (inotify) included
    CHECK(f.lines(*s).size() == 2);
    CHECK(open_fds() == before);
    f.append("a.log", "two\nthr");
    CHECK(f.lines(*s) == std::vector<std::string>{"two"});
    CHECK(open_fds() == before);  // closed again, its partial "thr" kept
    f.append("a.log", "ee\n");
    CHECK(f.lines(*s) == std::vector<std::string>{"three"});
    // Rewritten from its start while closed (another file in its inode, or copytruncate and
    // more): the fingerprint differs, so it is read from 0 rather than from the old position.
    { std::ofstream(f.dir.path() + "/logs/a.log", std::ios::trunc) << "new content, longer than before\n"; }
    CHECK(f.lines(*s) == std::vector<std::string>{"new content, longer than before"});
}

TEST_CASE("a closed file is opened again only through the safe open: hard-linked since, it is refused", "[shipper]") {
    Fixture f;
    f.cfg.idle_close_ms = 0;
    f.append("a.log", "1\n");
    auto s = f.source();
    CHECK(f.lines(*s) == std::vector<std::string>{"1"});  // and closed
    // A second name for it, such as a user makes to pass another file off as theirs.
    REQUIRE(::link((f.dir.path() + "/logs/a.log").c_str(), (f.dir.path() + "/a.link").c_str()) == 0);
    f.append("a.log", "2\n");
    CHECK(f.lines(*s).empty());
    CHECK(f.m.group<FileSourceMetrics>().files_refused.value({"hard_link"}) == 1);
}

TEST_CASE("a closed file renamed away after its last lines is finished, running and across a restart", "[shipper]") {
    Fixture f;
    f.cfg.idle_close_ms = 0;
    const std::string logs = f.dir.path() + "/logs/", app = logs + "app.log";
    // The files that take app.log's place are made first: lower inode numbers, so that in the
    // source's own order they come before the files they replace, and only reading rotated
    // files first keeps the older lines first.
    f.append("next2.tmp", "");
    f.append("next1.tmp", "");
    f.append("app.log", "1\n");
    auto s = f.source();
    CHECK(f.lines(*s) == std::vector<std::string>{"1"});  // and closed
    auto rotate = [&](const std::string& last, const std::string& to, const std::string& next, const char* tmp) {
        f.append("app.log", last);
        REQUIRE(::rename(app.c_str(), (app + to).c_str()) == 0);
        f.append(tmp, next);
        REQUIRE(::rename((logs + tmp).c_str(), app.c_str()) == 0);
    };
    rotate("2\n", ".1", "3\n", "next1.tmp");
    CHECK(f.lines(*s) == std::vector<std::string>{"2", "3"});  // the rotated file's older line first
    s.reset();
    rotate("4\n", ".2", "5\n", "next2.tmp");  // while the shipper is down
    auto again = f.source();
    CHECK(f.lines(*again) == std::vector<std::string>{"4", "5"});
}

TEST_CASE("a closed file renamed away with another file mounted over its new name is not finished from that file",
          "[shipper]") {
    // The rotated name's directory entry still holds our inode, but what opens there is the
    // mounted file (same filesystem, another inode): none of its bytes are ours to ship.
    Fixture f;
    f.cfg.idle_close_ms = 0;
    const std::string logs = f.dir.path() + "/logs/", app = logs + "app.log";
    const std::string secret = f.dir.path() + "/secret";
    std::ofstream(secret) << "1\nsomeone else's line\nand another\n";
    f.append("app.log", "1\n");
    auto s = f.source();
    CHECK(f.lines(*s) == std::vector<std::string>{"1"});  // and closed
    REQUIRE(::rename(app.c_str(), (app + ".1").c_str()) == 0);
    if (::mount(secret.c_str(), (app + ".1").c_str(), nullptr, MS_BIND, nullptr) != 0)
        JOBTRAIL_SKIP(std::string("cannot bind-mount here: ") + std::strerror(errno));
    const jobtrail::test::Unmount unmount{app + ".1"};
    for (int i = 0; i < 3; ++i) CHECK(f.lines(*s).empty());
    CHECK(f.m.group<FileSourceMetrics>().files_refused.samples().empty());
    CHECK(s->checkpoint().dump().find("app.log.1") == std::string::npos);
}

TEST_CASE("a closed file deleted and its inode number taken by a FIFO beside it is not looked for there", "[shipper]") {
    // Looked for by inode beside its old name (a rotation renames it), a deleted file's number
    // may come back as another kind of entry: that is no file of ours, not even to refuse.
    Fixture f;
    f.cfg.idle_close_ms = 0;
    const std::string logs = f.dir.path() + "/logs/";
    f.append("app.log", "1\n");
    std::vector<std::string> said;
    const Events events([&](const InternalEvent& e) { said.push_back(e.message); });
    FileSource s(f.cfg, f.options(events), f.m);
    auto pass = [&] {
        std::vector<Event> ev;
        s.poll(ev, 1 << 20);
        std::vector<std::string> out;
        for (auto& e : ev) out.push_back(e.line);
        return out;
    };
    CHECK(pass() == std::vector<std::string>{"1"});  // and closed
    struct stat old {};
    REQUIRE(::stat((logs + "app.log").c_str(), &old) == 0);
    REQUIRE(::unlink((logs + "app.log").c_str()) == 0);
    if (!make_in_inode(logs, "app.fifo", old.st_ino, [](const char* p) { return ::mkfifo(p, 0644); }))
        JOBTRAIL_SKIP("the filesystem did not reuse the inode");
    for (int i = 0; i < 3; ++i) CHECK(pass().empty());
    CHECK(said.empty());
    CHECK(f.m.group<FileSourceMetrics>().files_refused.samples().empty());
    CHECK(s.checkpoint().dump().find("app.fifo") == std::string::npos);
}

TEST_CASE("a closed file renamed away is finished whichever of its size or time changed", "[shipper]") {
    // Its last lines written with the time set back (a copy that keeps times, a clock stepped
    // back), or its time changed with no new bytes: each is found beside its old name, the new
    // lines read once, nothing read twice.
    Fixture f;
    f.cfg.idle_close_ms = 0;
    const std::string logs = f.dir.path() + "/logs/", app = logs + "app.log";
    f.append("app.log", "1\n");
    auto s = f.source();
    CHECK(f.lines(*s) == std::vector<std::string>{"1"});  // and closed
    struct stat before {};
    REQUIRE(::stat(app.c_str(), &before) == 0);
    f.append("app.log", "2\n");
    const struct timespec same[2] = {before.st_atim, before.st_mtim};
    REQUIRE(::utimensat(AT_FDCWD, app.c_str(), same, 0) == 0);
    REQUIRE(::rename(app.c_str(), (app + ".1").c_str()) == 0);
    CHECK(f.lines(*s) == std::vector<std::string>{"2"});
    // Renamed again, only its time changed: nothing more to read.
    const struct timespec later[2] = {{before.st_mtim.tv_sec + 60, 0}, {before.st_mtim.tv_sec + 60, 0}};
    REQUIRE(::utimensat(AT_FDCWD, (app + ".1").c_str(), later, 0) == 0);
    f.append("app.log", "3\n");
    CHECK(f.lines(*s) == std::vector<std::string>{"3"});
    // Renamed away and rewritten in place, as long as it was: its time says it changed, and its
    // content is another file's, read from its start.
    f.append("app.log", "4\n");
    CHECK(f.lines(*s) == std::vector<std::string>{"4"});
    REQUIRE(::rename(app.c_str(), (app + ".2").c_str()) == 0);
    { std::ofstream(app + ".2", std::ios::in | std::ios::out) << "A\nB\n"; }
    const struct timespec rewritten[2] = {{before.st_mtim.tv_sec + 120, 0}, {before.st_mtim.tv_sec + 120, 0}};
    REQUIRE(::utimensat(AT_FDCWD, (app + ".2").c_str(), rewritten, 0) == 0);  // not within the clock's tick
    CHECK(f.lines(*s) == std::vector<std::string>{"A", "B"});
}

TEST_CASE("one owner's files take at most their share of a source, root's are not counted", "[shipper]") {
    Fixture f(LineFormat::kNccl, "nccl/0");
    f.cfg.paths = {f.dir.path() + "/nccl/*/*.log"};
    f.cfg.max_files = 9;
    f.cfg.max_files_per_owner = 3;
    auto job = [&](const std::string& id, uid_t uid, int files) {
        const std::string dir = f.dir.path() + "/nccl/" + id;
        ::mkdir(dir.c_str(), 0755);
        REQUIRE(::chown(dir.c_str(), uid, uid) == 0);
        for (int i = 0; i < files; ++i) {
            const std::string p = dir + "/" + std::to_string(i) + ".n.1.log";
            std::ofstream(p) << "job " << id << " file " << i << "\n";
            REQUIRE(::chown(p.c_str(), uid, uid) == 0);
        }
    };
    job("0", 0, 4);                                           // root's (a site's own files): exempt from the share
    for (const char* id : {"1", "2", "3"}) job(id, 1001, 3);  // one user's many old jobs
    job("9", 1002, 2);                                        // another user's job, listed last
    std::vector<std::string> said;
    const Events events([&](const InternalEvent& e) { said.push_back(e.name + ": " + e.message); });
    FileSource s(f.cfg, f.options(events), f.m);
    std::vector<std::string> lines;
    for (int pass = 0; pass < 3; ++pass) {
        std::vector<Event> ev;
        s.poll(ev, 1 << 20);
        for (auto& e : ev) lines.push_back(e.line);
    }
    auto of = [&](const std::string& prefix) {
        return std::count_if(lines.begin(), lines.end(), [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
    };
    CHECK(of("job 0 ") == 4);
    CHECK(of("job 1 ") + of("job 2 ") + of("job 3 ") == 3);
    CHECK(of("job 9 ") == 2);  // not crowded out by uid 1001's
    CHECK(f.m.group<FileSourceMetrics>().files_refused.value({"too_many_files_of_owner"}) ==
          6);  // once each, not once per pass
    REQUIRE(said.size() == 1);
    CHECK(said[0].find("not reading 6 more files of uid 1001") != std::string::npos);
}

TEST_CASE("a pass's reading is shared by users, not by jobs or files: one user's bursts do not hold another's line",
          "[shipper]") {
    Fixture f(LineFormat::kNccl, "nccl/0");
    f.cfg.paths = {f.dir.path() + "/nccl/*/*.log"};
    const std::string body(200, 'a');
    auto job = [&](const std::string& id, uid_t uid, const std::string& text) {
        const std::string dir = f.dir.path() + "/nccl/" + id;
        ::mkdir(dir.c_str(), 0755);
        REQUIRE(::chown(dir.c_str(), uid, uid) == 0);
        const std::string p = dir + "/0.n.1.log";
        std::ofstream(p) << text;
        REQUIRE(::chown(p.c_str(), uid, uid) == 0);
    };
    // User 1001's ten jobs, listed first, each with a 2 MiB burst; user 1002's one line, listed last.
    std::string burst;
    for (int i = 0; burst.size() < (2u << 20); ++i) burst += "n:1:1 [0] NCCL INFO burst " + body + "\n";
    for (int j = 0; j < 10; ++j) job("1" + std::to_string(j), 1001, burst);
    job("9", 1002, "n:2:2 [0] NCCL WARN the other user's line\n");
    FileSource s(f.cfg, f.options(), f.m);
    // Read rounds of 1 MiB (the pipeline's pass): the other user's line comes in the first one,
    // and that user's half of the round went unused by them, not to the burst's user beyond theirs.
    std::vector<Event> ev;
    s.poll(ev, 1 << 20);
    const auto other = std::find_if(
        ev.begin(), ev.end(), [](const Event& e) { return e.line.find("the other user's line") != std::string::npos; });
    CHECK(other != ev.end());
    // The burst's user keeps the rest of the round: nothing is left unread for fairness' sake.
    size_t burst_bytes = 0;
    for (const auto& e : ev) burst_bytes += e.line.find("burst") != std::string::npos ? e.line.size() + 1 : 0;
    CHECK(burst_bytes > (600u << 10));
}

TEST_CASE("a rotated file's rest past its owner's share and the new file's lines come in the same pass", "[shipper]") {
    // One user's job log, rotated with more in it than that user's share of a pass (another
    // owner, root, has a file too): what the others leave of the pass goes to the rotated file
    // first, and once it is read to its end, to the file that took its name, not a pass later.
    Fixture f;
    const std::string logs = f.dir.path() + "/logs/", app = logs + "app.log";
    REQUIRE(::chown(logs.c_str(), 1001, 1001) == 0);  // the job's directory
    f.append("site.log", "root's line\n");
    f.append("app.log", "first\n");
    REQUIRE(::chown(app.c_str(), 1001, 1001) == 0);
    auto s = f.source();
    auto first = f.lines(*s);
    std::sort(first.begin(), first.end());
    CHECK(first == std::vector<std::string>{"first", "root's line"});
    std::string rest;
    for (int i = 0; i < 4000; ++i) rest += "rotated " + std::to_string(100000 + i) + std::string(80, '.') + "\n";
    f.append("app.log", rest);
    REQUIRE(::rename(app.c_str(), (app + ".1").c_str()) == 0);
    f.append("app.log", "the new file's line\n");
    REQUIRE(::chown(app.c_str(), 1001, 1001) == 0);
    std::vector<Event> ev;
    s->poll(ev, 1 << 20);
    REQUIRE(ev.size() == 4001);
    CHECK(ev.front().line.starts_with("rotated 100000"));
    CHECK(ev[3999].line.starts_with("rotated 103999"));
    CHECK(ev.back().line == "the new file's line");
    // A rest longer than a whole pass, in lines longer than what a pass has left when the next
    // does not fit: the new file's short line waits until the rest is read, and comes after it.
    rest.clear();
    for (int i = 0; i < 3000; ++i) rest += "rotated " + std::to_string(200000 + i) + std::string(900, '.') + "\n";
    f.append("app.log", rest);
    REQUIRE(::rename(app.c_str(), (app + ".2").c_str()) == 0);
    f.append("app.log", "n\n");
    REQUIRE(::chown(app.c_str(), 1001, 1001) == 0);
    const auto after = f.lines(*s);
    REQUIRE(after.size() == 3001);
    CHECK(after[2999].starts_with("rotated 202999"));
    CHECK(after.back() == "n");
}

TEST_CASE("unterminated lines past max_partial_bytes are shipped as lines, nothing lost", "[shipper]") {
    Fixture f;
    f.cfg.max_partial_bytes = 4096;
    const std::string body(100, 'x');
    for (int i = 0; i < 300; ++i) f.append(std::to_string(i) + ".log", "f" + std::to_string(i) + body);
    std::vector<std::string> said;
    const Events events([&](const InternalEvent& e) { said.push_back(e.name); });
    FileSource s(f.cfg, f.options(events), f.m);
    auto drain = [&] {
        std::vector<std::string> got;
        for (int pass = 0; pass < 3; ++pass) {
            std::vector<Event> ev;
            s.poll(ev, 1 << 20);
            for (auto& e : ev) got.push_back(e.line);
        }
        return got;
    };
    const auto cut = drain();
    for (int i = 0; i < 300; ++i) f.append(std::to_string(i) + ".log", "-end" + std::to_string(i) + "\n");
    auto rest = drain();
    std::set<std::string> all(cut.begin(), cut.end());
    all.insert(rest.begin(), rest.end());
    CHECK(all.size() == cut.size() + rest.size());  // nothing twice
    size_t whole = 0;
    for (int i = 0; i < 300; ++i) {
        const std::string head = "f" + std::to_string(i) + body, tail = "-end" + std::to_string(i);
        INFO(i);
        if (all.count(head + tail)) {
            ++whole;
        } else {
            CHECK(all.count(head));  // cut, and its rest a line of its own: every byte arrived
            CHECK(all.count(tail));
        }
    }
    // At most the cap's worth (4096 bytes of ~104-byte lines) waited whole for its newline.
    CHECK(whole <= 4096 / 104);
    CHECK(f.m.group<FileSourceMetrics>().partial_lines_cut == 300 - whole);
    CHECK(std::count(said.begin(), said.end(), "partial_lines_cut") == 1);  // said once, not per line
}

TEST_CASE("a directory full of links costs one line and no opens past its cap", "[shipper]") {
    Fixture f(LineFormat::kNccl, "nccl/5");
    f.cfg.paths = {f.dir.path() + "/nccl/*/*.log"};
    f.cfg.max_files_per_dir = 20;
    const std::string d = f.dir.path() + "/nccl/5";
    for (int i = 0; i < 200; ++i)
        REQUIRE(::symlink("/etc/shadow", (d + "/" + std::to_string(i) + ".n.1.log").c_str()) == 0);
    std::vector<std::string> said;
    const Events events([&](const InternalEvent& e) { said.push_back(e.message); });
    FileSource s(f.cfg, f.options(events), f.m);
    for (int pass = 0; pass < 3; ++pass) {
        std::vector<Event> ev;
        s.poll(ev, 1 << 20);
        CHECK(ev.empty());
    }
    CHECK(f.m.group<FileSourceMetrics>().files_refused.value({"symlink"}) == 20);  // opened (and refused) up to the cap
    CHECK(f.m.group<FileSourceMetrics>().files_refused.value({"too_many_files_in_directory"}) ==
          1);  // the rest not even listed
    // Ten said one by one, the rest in one line each: not two hundred lines.
    CHECK(said.size() == 12);
}

TEST_CASE("copytruncate seen while running: the restart resumes after the new lines, none lost or repeated",
          "[shipper]") {
    Fixture f;
    f.append("app.log", "aaaa\nbbbb\n");
    auto s = f.source();
    CHECK(f.lines(*s) == std::vector<std::string>{"aaaa", "bbbb"});
    // logrotate's copytruncate: the file is cut to nothing under the running source, then written on.
    REQUIRE(::truncate((f.dir.path() + "/logs/app.log").c_str(), 0) == 0);
    f.append("app.log", "c\n");
    CHECK(f.lines(*s) == std::vector<std::string>{"c"});
    s.reset();  // the checkpoint of that moment is what a restart resumes from
    f.append("app.log", "1\n2\n3\n4\n5\n6\n");
    auto again = f.source();
    CHECK(f.lines(*again) == std::vector<std::string>{"1", "2", "3", "4", "5", "6"});
}

TEST_CASE("a write into a tracked file wakes the idle shipper, and nothing new wakes nothing", "[shipper]") {
    Fixture f;
    f.append("a.log", "one\n");
    auto s = f.source();
    CHECK(f.lines(*s) == std::vector<std::string>{"one"});
    REQUIRE(s->wake_fd() >= 0);
    auto readable = [&](int ms) {
        pollfd p{s->wake_fd(), POLLIN, 0};
        return ::poll(&p, 1, ms) == 1;
    };
    s->woken();
    CHECK_FALSE(readable(0));
    f.append("a.log", "two\n");
    CHECK(readable(2000));
    s->woken();
    CHECK_FALSE(readable(0));
    CHECK(f.lines(*s) == std::vector<std::string>{"two"});
}

namespace {
// Root reads any directory whatever its mode; a node's FUSE mount or a directory root cannot
// read answers EACCES. With the filesystem uid of a user, root's permission checks are theirs
// (the capabilities that bypass them go with it), for the test's polls only.
struct AsUser {
    explicit AsUser(uid_t uid) { ::setfsuid(uid); }
    ~AsUser() { ::setfsuid(0); }
};
// Every line the source has now, sorted.
std::vector<std::string> poll_sorted(FileSource& s) {
    std::vector<Event> ev;
    while (s.poll(ev, 1 << 20)) {
    }
    std::vector<std::string> out;
    for (auto& e : ev) out.push_back(e.line);
    std::sort(out.begin(), out.end());
    return out;
}
std::vector<std::string> poll_as(FileSource& s, uid_t uid) {
    AsUser as(uid);
    return poll_sorted(s);
}
}  // namespace

TEST_CASE("a job directory that cannot be listed is skipped alone: other jobs ship, and it ships once it can",
          "[shipper]") {
    Fixture f(LineFormat::kNccl, "nccl");
    f.cfg.paths = {f.dir.path() + "/nccl/*/*.log"};
    REQUIRE(::chmod(f.dir.path().c_str(), 0755) == 0);
    auto job = [&](const std::string& id, uid_t uid, const std::string& line) {
        const std::string d = f.dir.path() + "/nccl/" + id;
        ::mkdir(d.c_str(), 0755);
        REQUIRE(::chown(d.c_str(), uid, uid) == 0);
        const std::string p = d + "/0.n1.1" + id + ".log";
        std::ofstream(p, std::ios::app) << line << "\n";
        REQUIRE(::chown(p.c_str(), uid, uid) == 0);
        return d;
    };
    const std::string kept = job("30", 65534, "tracked before");
    std::vector<std::string> said;
    const Events events([&](const InternalEvent& e) { said.push_back(e.name + ": " + e.message); });
    FileSource s(f.cfg, f.options(events), f.m);
    CHECK(poll_as(s, 65534) == std::vector<std::string>{"tracked before"});
    // Another user's job directory the shipper cannot list (mode 000 here; a FUSE mount without
    // allow_other answers root the same), listed before the others, and a tracked one going so.
    const std::string blocked = job("10", 1234, "blocked job");
    REQUIRE(::chmod(blocked.c_str(), 0) == 0);
    REQUIRE(::chmod(kept.c_str(), 0) == 0);
    job("20", 65534, "other user's new job");
    CHECK(poll_as(s, 65534) == std::vector<std::string>{"other user's new job"});
    CHECK(poll_as(s, 65534).empty());
    REQUIRE(said.size() == 2);  // said once each, not once per scan
    std::sort(said.begin(), said.end());
    CHECK(said[0].rfind("glob_failed: cannot list " + blocked + ": ", 0) == 0);
    CHECK(said[1].rfind("glob_failed: cannot list " + kept + ": ", 0) == 0);
    // The blocker goes: its lines ship; the tracked file was kept, not read again from its start.
    REQUIRE(::chmod(blocked.c_str(), 0755) == 0);
    REQUIRE(::chmod(kept.c_str(), 0755) == 0);
    std::ofstream(kept + "/0.n1.130.log", std::ios::app) << "tracked after\n";
    CHECK(poll_as(s, 65534) == std::vector<std::string>{"blocked job", "tracked after"});
    CHECK(poll_as(s, 65534).empty());
}

TEST_CASE("a directory past its cap is not read past it, and a file under it ships once the others go", "[shipper]") {
    Fixture f(LineFormat::kNccl, "nccl/5");
    f.cfg.paths = {f.dir.path() + "/nccl/*/*.log"};
    f.cfg.max_files_per_dir = 3;
    const std::string d = f.dir.path() + "/nccl/5/";
    for (int i = 0; i < 5; ++i) std::ofstream(d + std::to_string(i) + ".n.1.log") << "line " << i << "\n";
    auto s = f.source();
    auto first = f.lines(*s);
    CHECK(first.size() == 3);
    CHECK(f.lines(*s).empty());
    CHECK(f.m.group<FileSourceMetrics>().files_refused.value({"too_many_files_in_directory"}) == 1);
    // Two of the three read are deleted: the two waiting are read, none of the first again.
    size_t gone = 0;
    for (int i = 0; i < 5 && gone < 2; ++i) {
        const std::string line = "line " + std::to_string(i);
        if (std::find(first.begin(), first.end(), line) == first.end()) continue;
        ::unlink((d + std::to_string(i) + ".n.1.log").c_str());
        ++gone;
    }
    auto second = f.lines(*s);
    second = second.empty() ? f.lines(*s) : second;
    CHECK(second.size() == 2);
    for (const auto& l : second) CHECK(std::find(first.begin(), first.end(), l) == first.end());
}

TEST_CASE("finished jobs' idle files give their slots back, and one that grows again ships only its new lines",
          "[shipper]") {
    Fixture f(LineFormat::kNccl, "nccl");
    f.cfg.paths = {f.dir.path() + "/nccl/*/*.log"};
    f.cfg.max_files = 4;
    f.cfg.idle_close_ms = 0;
    f.cfg.release_after_ms = 0;  // released as soon as it is read to its end and closed
    auto job = [&](const std::string& id, int files) {
        const std::string d = f.dir.path() + "/nccl/" + id;
        ::mkdir(d.c_str(), 0755);
        for (int i = 0; i < files; ++i)
            std::ofstream(d + "/" + std::to_string(i) + ".n.1.log") << "job " << id << " file " << i << "\n";
    };
    job("1", 2);  // two finished jobs: every slot of the source
    job("2", 2);
    auto s = f.source();
    auto lines = f.lines(*s);
    CHECK(lines.size() == 4);
    job("3", 1);  // a new job: its file ships
    CHECK(f.lines(*s) == std::vector<std::string>{"job 3 file 0"});
    CHECK(f.m.group<FileSourceMetrics>().files_refused.value({"too_many_files"}) == 0);
    // An old file appended to: its new line only, once, also across a restart.
    std::ofstream(f.dir.path() + "/nccl/1/0.n.1.log", std::ios::app) << "job 1 again\n";
    CHECK(f.lines(*s) == std::vector<std::string>{"job 1 again"});
    CHECK(f.lines(*s).empty());
    s.reset();
    auto again = f.source();
    CHECK(f.lines(*again).empty());
    std::ofstream(f.dir.path() + "/nccl/2/1.n.1.log", std::ios::app) << "job 2 after the restart\n";
    CHECK(f.lines(*again) == std::vector<std::string>{"job 2 after the restart"});
    CHECK(f.lines(*again).empty());
    // Rewritten from its start while released: a new file, read from its start.
    { std::ofstream(f.dir.path() + "/nccl/1/1.n.1.log", std::ios::trunc) << "REWRITTEN one\nREWRITTEN two, longer\n"; }
    CHECK(f.lines(*again) == std::vector<std::string>{"REWRITTEN one", "REWRITTEN two, longer"});
}

TEST_CASE("a file replaced while the shipper was down is read from its start, not from the old offset", "[shipper]") {
    Fixture f;
    f.append("a.log", "old one\nold two\n");
    auto s = f.source();
    CHECK(f.lines(*s) == std::vector<std::string>{"old one", "old two"});
    s.reset();
    // The same inode, other content, longer than the old offset (a job rewriting its log).
    { std::ofstream(f.dir.path() + "/logs/a.log", std::ios::trunc) << "NEW first line\nNEW second\nNEW third\n"; }
    auto again = f.source();
    CHECK(f.lines(*again) == std::vector<std::string>{"NEW first line", "NEW second", "NEW third"});
}

namespace {

// A tmpfs on job 2's directory under `real`, as a user's FUSE mount would be (one that never
// answers must not be opened or stat-ed), and job 1 beside it; the source polled three times.
struct MountRun {
    std::string skipped;  // why no tmpfs could be mounted here
    std::vector<std::string> lines, said;
};
MountRun poll_beside_a_mount(Fixture& f, const std::string& real) {
    MountRun r;
    const std::string mnt = real + "/2";
    ::mkdir(mnt.c_str(), 0755);
    if (::mount("jobtrail-test", mnt.c_str(), "tmpfs", 0, "size=64k") != 0)
        return {std::string("cannot mount a tmpfs here: ") + std::strerror(errno), {}, {}};
    const jobtrail::test::Unmount unmount{mnt};
    std::ofstream(mnt + "/0.n.1.log") << "inside the mount\n";
    std::ofstream(real + "/1/0.n.2.log") << "a job beside it\n";
    const Events events([&](const InternalEvent& e) { r.said.push_back(e.message); });
    FileSource s(f.cfg, f.options(events), f.m);
    for (int pass = 0; pass < 3; ++pass) {
        std::vector<Event> ev;
        s.poll(ev, 1 << 20);
        for (auto& e : ev) r.lines.push_back(e.line);
    }
    return r;
}

}  // namespace

TEST_CASE("a filesystem mounted on a job directory is not entered, and the other jobs ship", "[shipper]") {
    Fixture f(LineFormat::kNccl, "nccl/1");
    f.cfg.paths = {f.dir.path() + "/nccl/*/*.log"};
    const auto r = poll_beside_a_mount(f, f.dir.path() + "/nccl");
    if (!r.skipped.empty()) JOBTRAIL_SKIP(r.skipped);
    CHECK(r.lines == std::vector<std::string>{"a job beside it"});
    CHECK(f.m.group<FileSourceMetrics>().files_refused.value({"mount_point"}) == 1);
    CHECK(r.said == std::vector<std::string>{"not reading " + f.dir.path() + "/nccl/2: a mount point"});
}

TEST_CASE("released files are capped per owner: many users' finished jobs never stop the next job's files",
          "[shipper]") {
    Fixture f(LineFormat::kNccl, "nccl");
    f.cfg.paths = {f.dir.path() + "/nccl/*/*.log"};
    f.cfg.max_files = 2;
    f.cfg.max_files_per_owner = 1;
    f.cfg.idle_close_ms = 0;
    f.cfg.release_after_ms = 0;
    auto job = [&](const std::string& id, uid_t uid, const std::string& file) {
        const std::string d = f.dir.path() + "/nccl/" + id;
        ::mkdir(d.c_str(), 0755);
        REQUIRE(::chown(d.c_str(), uid, uid) == 0);
        const std::string p = d + "/" + file + ".n.1.log";
        std::ofstream(p, std::ios::app) << "job " << id << " " << file << "\n";
        REQUIRE(::chown(p.c_str(), uid, uid) == 0);
        return p;
    };
    auto s = f.source();
    // Finished jobs of as many users as the source has slots, and more: each user's is released
    // (their share of released files is theirs), so the next user's job still ships.
    for (uid_t u = 1001; u <= 1005; ++u) {
        const std::string id = std::to_string(u);
        job(id, u, "0");
        CHECK(f.lines(*s) == std::vector<std::string>{"job " + id + " 0"});
    }
    CHECK(f.m.group<FileSourceMetrics>().files_refused.value({"too_many_files"}) == 0);
    // One user past their share of released files: their next idle file stays tracked (its
    // position is not forgotten), so their third counts against their own share only.
    job("1001", 1001, "1");
    CHECK(f.lines(*s) == std::vector<std::string>{"job 1001 1"});
    const std::string third = job("1001", 1001, "2");
    CHECK(f.lines(*s).empty());
    CHECK(f.m.group<FileSourceMetrics>().files_refused.value({"too_many_files_of_owner"}) == 1);
    job("1006", 1006, "0");
    CHECK(f.lines(*s) == std::vector<std::string>{"job 1006 0"});
    // Every released file appended to ships only its new line, also across a restart.
    std::ofstream(f.dir.path() + "/nccl/1002/0.n.1.log", std::ios::app) << "job 1002 again\n";
    CHECK(f.lines(*s) == std::vector<std::string>{"job 1002 again"});
    ::unlink(third.c_str());  // after a restart the owner's share may go to either file first
    s.reset();
    auto again = f.source();
    std::ofstream(f.dir.path() + "/nccl/1003/0.n.1.log", std::ios::app) << "job 1003 again\n";
    CHECK(f.lines(*again) == std::vector<std::string>{"job 1003 again"});
}

TEST_CASE("a job directory whose mtime a user sets back after adding a file is listed again", "[shipper]") {
    Fixture f(LineFormat::kNccl, "nccl/1");
    f.cfg.paths = {f.dir.path() + "/nccl/*/*.log"};
    const std::string d = f.dir.path() + "/nccl/1";
    std::ofstream(d + "/0.n.1.log") << "first file\n";
    // touch -d: the directory's mtime an hour back, as its owner may set it.
    const struct timespec back[2] = {{0, UTIME_OMIT}, {::time(nullptr) - 3600, 0}};
    REQUIRE(::utimensat(AT_FDCWD, d.c_str(), back, 0) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // past the coarse clock's second
    auto s = f.source();
    CHECK(f.lines(*s) == std::vector<std::string>{"first file"});
    std::ofstream(d + "/1.n.1.log") << "hidden file\n";
    REQUIRE(::utimensat(AT_FDCWD, d.c_str(), back, 0) == 0);  // its ctime is the kernel's, not theirs
    CHECK(f.lines(*s) == std::vector<std::string>{"hidden file"});
}

TEST_CASE("a refused file's kept position goes with the file: a new file in its inode is read from its start",
          "[shipper]") {
    Fixture f;
    f.cfg.idle_close_ms = 0;
    const std::string a = f.dir.path() + "/logs/a.log", link = f.dir.path() + "/a.link";
    f.append("a.log", "1\n");
    auto s = f.source();
    CHECK(f.lines(*s) == std::vector<std::string>{"1"});  // and closed
    // Hard-linked since (refused, its position kept in case it comes back as it was), then gone.
    REQUIRE(::link(a.c_str(), link.c_str()) == 0);
    f.append("a.log", "2\n");
    CHECK(f.lines(*s).empty());
    struct stat old {};
    REQUIRE(::stat(a.c_str(), &old) == 0);
    ::unlink(a.c_str());
    ::unlink(link.c_str());
    CHECK(f.lines(*s).empty());
    // A new job's file that begins alike, in the inode the filesystem gave back.
    if (!make_in_inode(f.dir.path() + "/logs", "b.log", old.st_ino,
                       [](const char* p) { return ::mknod(p, S_IFREG | 0644, 0); }))
        JOBTRAIL_SKIP("the filesystem did not reuse the inode");
    f.append("b.log", "1\nnew job\n");
    CHECK(f.lines(*s) == std::vector<std::string>{"1", "new job"});
}

TEST_CASE("a mount under a configured path that goes through a symlink is known as a mount point, not entered",
          "[shipper]") {
    Fixture f(LineFormat::kNccl, "real/1");
    // The site's path as configured, through a link (/var/log/slurm -> /data/slurm).
    REQUIRE(::symlink((f.dir.path() + "/real").c_str(), (f.dir.path() + "/nccl").c_str()) == 0);
    f.cfg.paths = {f.dir.path() + "/nccl/*/*.log"};
    const auto r = poll_beside_a_mount(f, f.dir.path() + "/real");
    if (!r.skipped.empty()) JOBTRAIL_SKIP(r.skipped);
    CHECK(r.lines == std::vector<std::string>{"a job beside it"});
    CHECK(f.m.group<FileSourceMetrics>().files_refused.value({"mount_point"}) == 1);
    CHECK(r.said == std::vector<std::string>{"not reading " + f.dir.path() + "/nccl/2: a mount point"});
}

TEST_CASE("braces in a path are glob's: each alternative read, nested ones too, an unclosed brace taken as it is",
          "[shipper]") {
    Fixture f(LineFormat::kPlain, "prolog");
    const std::string d = f.dir.path() + "/";
    for (const char* sub : {"epilog", "epix", "other", "{odd", "{odd}"}) ::mkdir((d + sub).c_str(), 0755);
    for (const char* sub : {"prolog", "epilog", "epix", "other", "{odd", "{odd}"})
        std::ofstream(d + sub + "/a.log") << sub << "\n";
    f.cfg.paths = {d + "{prolog,epi{log,x}}/*.log", d + "{odd/*.log"};
    auto s = f.source();
    auto l = f.lines(*s);
    std::sort(l.begin(), l.end());
    CHECK(l == std::vector<std::string>{"epilog", "epix", "prolog", "{odd"});
}

TEST_CASE("a configured path without wildcards is read as that one file", "[shipper]") {
    Fixture f;
    f.append("a.log", "the configured file\n");
    f.append("b.log", "its neighbour\n");
    f.cfg.paths = {f.dir.path() + "/logs/a.log", f.dir.path() + "/logs/missing.log"};
    auto s = f.source();
    CHECK(f.lines(*s) == std::vector<std::string>{"the configured file"});
    f.append("a.log", "more\n");
    CHECK(f.lines(*s) == std::vector<std::string>{"more"});
}

TEST_CASE("a path's plain parts after a wildcard are entered by name and other directories are not", "[shipper]") {
    Fixture f(LineFormat::kNccl, "nccl/1/out");
    const std::string d = f.dir.path() + "/nccl/";
    f.cfg.paths = {d + "[0-9]*/out/*.log", d + "*/err.log"};
    for (const char* sub : {"1/other", "x", "x/out", "2"}) ::mkdir((d + sub).c_str(), 0755);
    std::ofstream(d + "1/out/0.n.1.log") << "job 1 out\n";
    std::ofstream(d + "1/other/0.n.1.log") << "job 1 other\n";
    std::ofstream(d + "x/out/0.n.1.log") << "not a job\n";
    std::ofstream(d + "2/err.log") << "job 2 err\n";
    std::ofstream(d + "2/out.log") << "job 2 not configured\n";
    // A file where the wildcard names directories is not entered, nor said to be refused.
    std::ofstream(d + "3") << "a file\n";
    std::vector<std::string> said;
    const Events events([&](const InternalEvent& e) { said.push_back(e.message); });
    FileSource s(f.cfg, f.options(events), f.m);
    CHECK(poll_sorted(s) == std::vector<std::string>{"job 1 out", "job 2 err"});
    CHECK(said.empty());
}

TEST_CASE("under the source's cap the job directories are taken in order of their names", "[shipper]") {
    Fixture f(LineFormat::kNccl, "nccl");
    f.cfg.paths = {f.dir.path() + "/nccl/*/*.log"};
    f.cfg.max_files = 3;
    // Made in an order that is not their names' (the directory's own order is the filesystem's).
    for (const char* id : {"7", "3", "9", "1", "5", "8", "2", "6", "4"}) {
        const std::string d = f.dir.path() + "/nccl/" + id;
        ::mkdir(d.c_str(), 0755);
        std::ofstream(d + "/0.n.1.log") << "job " << id << "\n";
    }
    const Events events([](const InternalEvent&) {});
    FileSource s(f.cfg, f.options(events), f.m);
    CHECK(poll_sorted(s) == std::vector<std::string>{"job 1", "job 2", "job 3"});
}

TEST_CASE("ten refused directories are said one by one and the eleventh in the scan's summary line", "[shipper]") {
    Fixture f(LineFormat::kNccl, "nccl/0");
    f.cfg.paths = {f.dir.path() + "/nccl/*/*.log"};
    ::mkdir((f.dir.path() + "/elsewhere").c_str(), 0755);
    for (int i = 1; i <= 11; ++i)
        REQUIRE(::symlink((f.dir.path() + "/elsewhere").c_str(),
                          (f.dir.path() + "/nccl/" + std::to_string(i)).c_str()) == 0);
    std::vector<std::string> said;
    const Events events([&](const InternalEvent& e) { said.push_back(e.message); });
    FileSource s(f.cfg, f.options(events), f.m);
    for (int pass = 0; pass < 3; ++pass) {
        std::vector<Event> ev;
        s.poll(ev, 1 << 20);
    }
    REQUIRE(said.size() == 11);  // once, not once per scan
    for (size_t i = 0; i < 10; ++i) CHECK(said[i].ends_with(": a symlink to a directory"));
    CHECK(said[10].rfind("not reading 1 more files (", 0) == 0);
    CHECK(f.m.group<FileSourceMetrics>().files_refused.value({"symlink"}) == 11);
}

TEST_CASE("a source holds exactly max_open_files descriptors open when it has that many files", "[shipper]") {
    Fixture f;
    f.cfg.max_open_files = 3;
    auto s = f.source();
    const size_t before = open_fds();
    for (const char* name : {"a.log", "b.log", "c.log"}) f.append(name, "x\n");
    CHECK(f.lines(*s).size() == 3);
    CHECK(open_fds() - before == 3);
    f.append("d.log", "x\n");
    CHECK(f.lines(*s).size() == 1);
    CHECK(open_fds() - before == 3);
}

TEST_CASE("a line of exactly max_line bytes is shipped whole and one byte more is cut with the marker", "[shipper]") {
    Fixture f;  // max_line 1024
    f.append("a.log", std::string(1024, 'a') + "\n" + std::string(1025, 'b') + "\n");
    auto s = f.source();
    const auto l = f.lines(*s);
    REQUIRE(l.size() == 2);
    CHECK(l[0] == std::string(1024, 'a'));
    // Cut to 64 bytes short of the cap, room for the marker.
    CHECK(l[1] == std::string(960, 'b') + " [jobtrail: line truncated, 65 bytes dropped]");
}

TEST_CASE("a CRLF line end is not part of the line", "[shipper]") {
    Fixture f;
    f.append("a.log", "windows\r\nunix\n\r\n");
    auto s = f.source();
    CHECK(f.lines(*s) == std::vector<std::string>{"windows", "unix", ""});
}

TEST_CASE("a line without end is held up to max_line plus 4096 bytes and one byte more ships it cut", "[shipper]") {
    Fixture f;  // max_line 1024, idle_ms long: a held line is not shipped for being idle
    f.append("a.log", std::string(1024 + 4096, 'x'));
    auto s = f.source();
    CHECK(f.lines(*s).empty());
    f.append("a.log", "y");
    const auto l = f.lines(*s);
    REQUIRE(l.size() == 1);
    CHECK(l[0] == std::string(960, 'x') + " [jobtrail: line truncated, 4161 bytes dropped]");
    f.append("a.log", "z\n");  // its end: a line of its own
    CHECK(f.lines(*s) == std::vector<std::string>{"z"});
}

TEST_CASE("a configured directory that cannot be opened is said once and read once it can, a missing one is not said",
          "[shipper]") {
    Fixture f;
    REQUIRE(::chmod(f.dir.path().c_str(), 0755) == 0);
    const std::string logs = f.dir.path() + "/logs";
    std::ofstream(f.dir.path() + "/afile") << "a file, not a directory\n";
    f.cfg.paths = {logs + "/*.log", f.dir.path() + "/missing/*.log", f.dir.path() + "/afile/*.log"};
    f.append("a.log", "1\n");
    REQUIRE(::chmod(logs.c_str(), 0) == 0);  // root's, and the shipper runs as a user here
    std::vector<std::string> said;
    const Events events([&](const InternalEvent& e) { said.push_back(e.name + ": " + e.message); });
    FileSource s(f.cfg, f.options(events), f.m);
    CHECK(poll_as(s, 65534).empty());
    CHECK(poll_as(s, 65534).empty());
    REQUIRE(said.size() == 1);  // once, not once per scan
    CHECK(said[0].rfind("glob_failed: cannot list " + logs + ": ", 0) == 0);
    REQUIRE(::chmod(logs.c_str(), 0755) == 0);
    CHECK(poll_as(s, 65534) == std::vector<std::string>{"1"});
    CHECK(said.size() == 1);
}

TEST_CASE("a directory unchanged since its last listing still has its closed files read on and its refusals kept",
          "[shipper]") {
    // A directory is listed again only when its times change (or within a second of its last
    // change): one left as it was is not, and what that listing knew must hold until it is.
    Fixture f;
    const std::string logs = f.dir.path() + "/logs", full = f.dir.path() + "/full";
    ::mkdir(full.c_str(), 0755);
    f.cfg.paths = {logs + "/*.log", full + "/*.log"};
    f.cfg.idle_close_ms = 0;      // closed as soon as read to their end
    f.cfg.max_files_per_dir = 5;  // logs has 4 entries, then 5; full has 7
    f.append("a.log", "1\n");
    f.append("b.log", "x\n");
    REQUIRE(::mkfifo((logs + "/c.log").c_str(), 0644) == 0);
    REQUIRE(::symlink("/etc/hostname", (logs + "/d.log").c_str()) == 0);
    for (int i = 0; i < 7; ++i) std::ofstream(full + "/" + std::to_string(i) + ".log") << "f" << i << "\n";
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // past the coarse clock's second
    std::vector<std::string> said;
    const Events events([&](const InternalEvent& e) { said.push_back(e.message); });
    FileSource s(f.cfg, f.options(events), f.m);
    auto pass = [&] { return poll_sorted(s); };
    const auto first = pass();
    CHECK(first.size() == 7);  // a, b and five of full's
    CHECK(said.size() == 3);   // the FIFO, the link, full past its cap
    f.append("a.log", "2\n");  // a file's growth changes nothing of its directory
    CHECK(pass() == std::vector<std::string>{"2"});
    f.append("b.log", "y\n");
    CHECK(pass() == std::vector<std::string>{"y"});
    // Rewritten in place to the same size, only its time says so: read again from its start.
    {
        struct stat before {};
        REQUIRE(::stat((logs + "/b.log").c_str(), &before) == 0);
        std::ofstream(logs + "/b.log", std::ios::in | std::ios::out) << "X\nY\n";
        const struct timespec later[2] = {{before.st_mtim.tv_sec + 120, 0}, {before.st_mtim.tv_sec + 120, 0}};
        REQUIRE(::utimensat(AT_FDCWD, (logs + "/b.log").c_str(), later, 0) == 0);
    }
    CHECK(pass() == std::vector<std::string>{"X", "Y"});
    // Both directories change: listed again, what was refused is not opened, said or counted again.
    f.append("e.log", "e\n");
    std::ofstream(full + "/7.log") << "f7\n";
    CHECK(pass() == std::vector<std::string>{"e"});
    CHECK(pass().empty());
    CHECK(said.size() == 3);
    CHECK(f.m.group<FileSourceMetrics>().files_refused.samples() ==
          std::map<jobtrail::metrics::Labels, uint64_t>{
              {{"not_regular"}, 1}, {{"symlink"}, 1}, {{"too_many_files_in_directory"}, 1}});
}

TEST_CASE("copytruncate of a file holding a line without end ships that line then the new ones", "[shipper]") {
    Fixture f;
    f.append("app.log", "aaaa\npart");
    auto s = f.source();
    CHECK(f.lines(*s) == std::vector<std::string>{"aaaa"});
    REQUIRE(::truncate((f.dir.path() + "/logs/app.log").c_str(), 0) == 0);
    f.append("app.log", "c\n");
    CHECK(f.lines(*s) == std::vector<std::string>{"part", "c"});
}

TEST_CASE("copytruncate of a CRI log holding a P piece ships the piece as it is then the new lines", "[shipper]") {
    Fixture f(LineFormat::kCri);
    f.append("pod.log", "2026-11-29T21:52:22.146801327Z stdout P held piece\n");
    auto s = f.source();
    CHECK(f.lines(*s).empty());
    REQUIRE(::truncate((f.dir.path() + "/logs/pod.log").c_str(), 0) == 0);
    f.append("pod.log", "2026-11-29T21:52:23.000000000Z stdout F new line\n");
    CHECK(f.lines(*s) == std::vector<std::string>{"held piece", "new line"});
}

TEST_CASE("lines cut for max_partial_bytes are said at most once in 10 s, and what was cut meanwhile after",
          "[shipper]") {
    // A job printing without newlines keeps the warning on the shipper's own stream to one in
    // 10 s; the cuts in between are counted into the next one, not dropped from it.
    Fixture f;
    f.cfg.max_partial_bytes = 100;
    std::vector<std::string> said;
    const Events events([&](const InternalEvent& e) {
        if (e.name == "partial_lines_cut") said.push_back(e.message);
    });
    FileSource s(f.cfg, f.options(events), f.m);
    const auto cut = [&](const std::string& name) {
        f.append(name, std::string(150, 'x'));  // one line without end, past the cap
        std::vector<Event> ev;
        while (s.poll(ev, 1 << 20)) {
        }
    };
    cut("a.log");
    cut("b.log");
    REQUIRE(said.size() == 1);
    CHECK(said[0].rfind("shipped 1 unterminated lines (150 bytes)", 0) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(10'100));  // the warning's own interval
    cut("c.log");
    REQUIRE(said.size() == 2);
    CHECK(said[1].rfind("shipped 2 unterminated lines (300 bytes)", 0) == 0);  // b's, then c's
    CHECK(f.m.group<FileSourceMetrics>().partial_lines_cut == 3);
}

TEST_CASE("a CRI log restarted from a held piece then rewritten while closed is read whole from its start",
          "[shipper]") {
    // A restart from a held P piece replays the file's start, skipping the lines shipped before
    // it. The file rewritten later in its inode (closed as idle meanwhile) is another file: none
    // of its lines are taken for the old file's, whatever their offsets.
    Fixture f(LineFormat::kCri);
    f.cfg.idle_close_ms = 0;
    f.append("pod.log",
             "2026-11-29T21:52:22.000000000Z stdout P held \n"
             "2026-11-29T21:52:22.100000000Z stderr F old one\n"
             "2026-11-29T21:52:22.200000000Z stderr F old two\n");
    {
        auto s = f.source();
        CHECK(f.lines(*s) == std::vector<std::string>{"old one", "old two"});
    }
    auto s = f.source();
    CHECK(f.lines(*s).empty());  // the replay: nothing twice, the piece held again
    {
        std::ofstream(f.dir.path() + "/logs/pod.log", std::ios::trunc)
            << "2026-11-29T22:00:00.000000000Z stderr F new one\n"
               "2026-11-29T22:00:00.100000000Z stderr F new two\n"
               "2026-11-29T22:00:00.200000000Z stdout F new three\n";
    }
    CHECK(f.lines(*s) == std::vector<std::string>{"held ", "new one", "new two", "new three"});
}

TEST_CASE("at shutdown a last line without end is shipped but not a line a pass's budget cut short", "[shipper]") {
    Fixture f;
    f.append("a.log", "0123456789abcdef\n");
    auto s = f.source();
    std::vector<Event> ev;
    s->poll(ev, 10);  // stops ten bytes into the line
    s->flush_partial(ev);
    CHECK(ev.empty());
    s->poll(ev, 1 << 20);
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].line == "0123456789abcdef");
    f.append("a.log", "tail");
    ev.clear();
    s->poll(ev, 1 << 20);
    CHECK(ev.empty());  // waits for its end
    s->flush_partial(ev);
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].line == "tail");
}

TEST_CASE("CRI P pieces held past max_partial_bytes are shipped before their F line, which follows as its own",
          "[shipper]") {
    // A container writing one endless line in 16 KiB pieces: what waits for its F counts
    // against the same bound as a plain file's line without end.
    Fixture f(LineFormat::kCri);
    f.cfg.max_partial_bytes = 100;
    const std::string piece(150, 'p');
    f.append("pod.log", "2026-11-29T21:52:22.000000000Z stdout P " + piece + "\n");
    auto s = f.source();
    CHECK(f.lines(*s) == std::vector<std::string>{piece});
    CHECK(f.m.group<FileSourceMetrics>().partial_lines_cut == 1);
    f.append("pod.log", "2026-11-29T21:52:23.000000000Z stdout F end\n");
    CHECK(f.lines(*s) == std::vector<std::string>{"end"});
}

TEST_CASE("at shutdown a CRI P piece waiting for its F line is shipped as it is", "[shipper]") {
    Fixture f(LineFormat::kCri);
    f.append("pod.log",
             "2026-11-29T21:52:22.146801327Z stdout F whole\n2026-11-29T21:52:22.246801327Z stderr P half\n");
    auto s = f.source();
    std::vector<Event> ev;
    s->poll(ev, 1 << 20);
    REQUIRE(ev.size() == 1);
    s->flush_partial(ev);
    REQUIRE(ev.size() == 2);
    CHECK(ev[1].line == "half");
    CHECK(ev[1].metadata[0].second == "stderr");
}

TEST_CASE("a source's backlog is the bytes of its files not read yet", "[shipper]") {
    Fixture f;
    f.append("a.log", "0123456789abcdef\n");  // 17 bytes
    auto s = f.source();
    std::vector<Event> ev;
    s->poll(ev, 10);
    CHECK(s->backlog_bytes() == 7);
    s->poll(ev, 1 << 20);
    CHECK(s->backlog_bytes() == 0);
    REQUIRE(ev.size() == 1);
}

TEST_CASE("lines without end are cut only past max_partial_bytes and longest first until the rest fits", "[shipper]") {
    Fixture f;
    f.cfg.max_partial_bytes = 100;
    // The longest made last: it is not the first in the source's own order.
    f.append("c.log", std::string(50, 'c'));
    f.append("b.log", std::string(50, 'b'));
    f.append("a.log", std::string(60, 'a'));
    auto s = f.source();
    CHECK(f.lines(*s) == std::vector<std::string>{std::string(60, 'a')});  // 160 held: 100 left
    CHECK(f.lines(*s).empty());                                            // 100 held: at the cap, not past it
    f.append("b.log", "b");
    CHECK(f.lines(*s) == std::vector<std::string>{std::string(51, 'b')});
    f.append("c.log", "c\n");
    CHECK(f.lines(*s) == std::vector<std::string>{std::string(51, 'c')});
    CHECK(f.m.group<FileSourceMetrics>().partial_lines_cut == 2);
}

TEST_CASE("a closed file rewritten in place to the same size is read again from its start", "[shipper]") {
    Fixture f;
    f.cfg.idle_close_ms = 0;
    const std::string a = f.dir.path() + "/logs/a.log";
    f.append("a.log", "AAAA\n");
    auto s = f.source();
    CHECK(f.lines(*s) == std::vector<std::string>{"AAAA"});  // and closed
    struct stat before {};
    REQUIRE(::stat(a.c_str(), &before) == 0);
    { std::ofstream(a, std::ios::in | std::ios::out) << "BBBB\n"; }
    const struct timespec later[2] = {{before.st_mtim.tv_sec + 120, 0}, {before.st_mtim.tv_sec + 120, 0}};
    REQUIRE(::utimensat(AT_FDCWD, a.c_str(), later, 0) == 0);  // its size the same, its time not
    CHECK(f.lines(*s) == std::vector<std::string>{"BBBB"});
}

TEST_CASE("a log the config names without a pattern, with a filesystem mounted over it, is refused and said",
          "[shipper]") {
    // The site's path names the file itself: no listing, the name looked up alone. A user who can
    // mount there (a FUSE daemon) must not have it read, or stat'ed, through the mount.
    Fixture f;
    const std::string secret = f.dir.path() + "/secret";
    std::ofstream(secret) << "another filesystem's file\n";
    f.append("m.log", "");
    f.append("plain.log", "the named log beside it\n");
    const std::string target = f.dir.path() + "/logs/m.log";
    f.cfg.paths = {target, f.dir.path() + "/logs/plain.log"};
    if (::mount(secret.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0)
        JOBTRAIL_SKIP(std::string("cannot bind-mount here: ") + std::strerror(errno));
    const jobtrail::test::Unmount unmount{target};
    std::vector<std::string> said;
    FileSource s(f.cfg, Fixture::options(Events([&](const InternalEvent& e) { said.push_back(e.message); })), f.m);
    std::vector<Event> ev;
    for (int pass = 0; pass < 3; ++pass) s.poll(ev, 1 << 20);
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].line == "the named log beside it");
    CHECK(f.m.group<FileSourceMetrics>().files_refused.value({"mount_point"}) == 1);
    CHECK(said == std::vector<std::string>{"not reading " + target + ": a mount point"});
}

TEST_CASE("a file mounted over a log's name is not read, and the files beside it are", "[shipper]") {
    Fixture f;
    const std::string secret = f.dir.path() + "/secret";
    std::ofstream(secret) << "another filesystem's file\n";
    for (int i = 0; i < 10; ++i) f.append(std::to_string(i) + ".log", "beside " + std::to_string(i) + "\n");
    f.append("m.log", "");
    const std::string target = f.dir.path() + "/logs/m.log";
    if (::mount(secret.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0)
        JOBTRAIL_SKIP(std::string("cannot bind-mount here: ") + std::strerror(errno));
    const jobtrail::test::Unmount unmount{target};
    auto s = f.source();
    auto l = f.lines(*s);
    std::sort(l.begin(), l.end());
    std::vector<std::string> want;
    for (int i = 0; i < 10; ++i) want.push_back("beside " + std::to_string(i));
    CHECK(l == want);
    CHECK(f.m.group<FileSourceMetrics>().files_refused.value({"mount_point"}) == 1);
}

TEST_CASE("a released file in a directory unchanged since is still known when the directory changes", "[shipper]") {
    Fixture f;
    f.cfg.idle_close_ms = 0;
    f.cfg.release_after_ms = 0;  // released as soon as it is read to its end and closed
    f.append("a.log", "1\n");
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // past the coarse clock's second
    auto s = f.source();
    CHECK(f.lines(*s) == std::vector<std::string>{"1"});
    CHECK(f.lines(*s).empty());
    CHECK(f.lines(*s).empty());  // the directory not listed again: its released file not seen
    f.append("b.log", "b\n");
    CHECK(f.lines(*s) == std::vector<std::string>{"b"});  // not a.log's line again
}

TEST_CASE("a released file deleted since is gone from the checkpoint once its directory is listed", "[shipper]") {
    Fixture f;
    f.cfg.idle_close_ms = 0;
    f.cfg.release_after_ms = 0;
    f.append("a.log", "1\n");
    auto s = f.source();
    CHECK(f.lines(*s) == std::vector<std::string>{"1"});
    CHECK(f.lines(*s).empty());
    REQUIRE(s->checkpoint().dump().find("/logs/a.log") != std::string::npos);  // released, kept
    ::unlink((f.dir.path() + "/logs/a.log").c_str());
    CHECK(f.lines(*s).empty());
    CHECK(s->checkpoint().dump().find("/logs/a.log") == std::string::npos);
}

TEST_CASE("a file refused at the source's cap in a directory that does not change ships once a slot is freed elsewhere",
          "[shipper]") {
    Fixture f(LineFormat::kNccl, "nccl");
    f.cfg.paths = {f.dir.path() + "/nccl/*/*.log"};
    f.cfg.max_files = 2;
    f.cfg.idle_close_ms = 0;
    const auto job = [&](const std::string& id, int files) {
        const std::string d = f.dir.path() + "/nccl/" + id;
        ::mkdir(d.c_str(), 0755);
        for (int i = 0; i < files; ++i)
            std::ofstream(d + "/" + std::to_string(i) + ".n.1.log") << "job " << id << " file " << i << "\n";
    };
    job("1", 2);  // every slot of the source
    job("2", 1);  // listed after job 1: its file is refused
    // Past the coarse clock's second: job 2's directory is then remembered as listed, and not
    // listed again while it does not change.
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    auto s = f.source();
    CHECK(poll_sorted(*s) == std::vector<std::string>{"job 1 file 0", "job 1 file 1"});
    CHECK(f.lines(*s).empty());
    CHECK(f.m.group<FileSourceMetrics>().files_refused.value({"too_many_files"}) == 1);
    ::unlink((f.dir.path() + "/nccl/1/1.n.1.log").c_str());  // read to its end and removed: a slot free
    std::vector<std::string> got;
    for (int pass = 0; pass < 3 && got.empty(); ++pass) got = f.lines(*s);
    CHECK(got == std::vector<std::string>{"job 2 file 0"});
}

TEST_CASE("a released file rewritten in place to the same size is read again from its start", "[shipper]") {
    Fixture f(LineFormat::kNccl, "nccl");
    f.cfg.paths = {f.dir.path() + "/nccl/*/*.log"};
    f.cfg.idle_close_ms = 0;
    f.cfg.release_after_ms = 0;  // released once read to its end and closed
    const std::string d = f.dir.path() + "/nccl/1", p = d + "/0.n.1.log";
    ::mkdir(d.c_str(), 0755);
    std::ofstream(p) << "first run\n";
    auto s = f.source();
    CHECK(f.lines(*s) == std::vector<std::string>{"first run"});
    CHECK(f.lines(*s).empty());
    // The same inode and size, other bytes, a later mtime (a job writing its log again).
    { std::ofstream(p, std::ios::in | std::ios::out) << "again run\n"; }
    const struct timespec later[2] = {{0, UTIME_OMIT}, {::time(nullptr) + 10, 0}};
    REQUIRE(::utimensat(AT_FDCWD, p.c_str(), later, 0) == 0);
    CHECK(f.lines(*s) == std::vector<std::string>{"again run"});
    CHECK(f.lines(*s).empty());
}

TEST_CASE("a checkpoint of an older or damaged shipper is used for what it holds and no line is read twice",
          "[shipper]") {
    SECTION("a released file's entry without its owner or with an owner that is not a number") {
        for (const nlohmann::json& owner : {nlohmann::json(), nlohmann::json("root")}) {
            Fixture f;
            f.cfg.idle_close_ms = 0;
            f.cfg.release_after_ms = 0;  // released once read to its end and closed
            f.append("a.log", "a one\n");
            {
                auto s = f.source();
                CHECK(f.lines(*s) == std::vector<std::string>{"a one"});
                CHECK(f.lines(*s).empty());
            }
            auto& entry = f.saved["files"].at(0);
            REQUIRE(entry.contains("released"));
            if (owner.is_null())
                entry["released"].erase("uid");  // written before owners were kept
            else
                entry["released"]["uid"] = owner;
            auto s = f.source();
            CHECK(f.lines(*s).empty());
            f.append("a.log", "a two\n");
            CHECK(f.lines(*s) == std::vector<std::string>{"a two"});
        }
    }
    SECTION("a tracked file's entry without its path or with a path that is not text, and one of a file gone") {
        for (const nlohmann::json& path : {nlohmann::json(), nlohmann::json(7)}) {
            Fixture f;
            f.append("b.log", "b one\n");
            {
                auto s = f.source();
                CHECK(f.lines(*s) == std::vector<std::string>{"b one"});
            }
            auto& entry = f.saved["files"].at(0);
            REQUIRE_FALSE(entry.contains("released"));
            if (path.is_null())
                entry.erase("path");
            else
                entry["path"] = path;
            // A file deleted while the shipper was down, its entry without a path either.
            f.saved["files"].push_back({{"key", "1:2"}, {"fp", entry["fp"]}, {"offset", 3}});
            auto s = f.source();
            CHECK(f.lines(*s).empty());
            f.append("b.log", "b two\n");
            CHECK(f.lines(*s) == std::vector<std::string>{"b two"});
            CHECK(f.saved.dump().find("\"1:2\"") == std::string::npos);  // the gone file's entry dropped
        }
    }
}

TEST_CASE("a link refused in a directory at its cap is not one file too many: no cap said and its files ship",
          "[shipper]") {
    Fixture f;
    f.cfg.max_files_per_dir = 2;
    const std::string logs = f.dir.path() + "/logs/";
    std::ofstream(f.dir.path() + "/outside") << "not ours\n";
    REQUIRE(::symlink((f.dir.path() + "/outside").c_str(), (logs + "c.log").c_str()) == 0);
    f.append("a.log", "a one\n");
    auto s = f.source();
    CHECK(f.lines(*s) == std::vector<std::string>{"a one"});
    f.append("b.log", "b one\n");
    CHECK(f.lines(*s) == std::vector<std::string>{"b one"});
    // Two files tracked, the directory listed again: the refused link is known, not counted.
    for (int pass = 0; pass < 3; ++pass) {
        std::ofstream(logs + "x" + std::to_string(pass) + ".txt") << "\n";  // the directory changes
        f.append("a.log", "a " + std::to_string(pass) + "\n");
        CHECK(f.lines(*s) == std::vector<std::string>{"a " + std::to_string(pass)});
    }
    const auto& refused = f.m.group<FileSourceMetrics>().files_refused;
    CHECK(refused.value({"symlink"}) == 1);
    CHECK(refused.value({"too_many_files_in_directory"}) == 0);
}
