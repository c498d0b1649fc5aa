// A spool on a filesystem with no inode left: a segment file cannot be created, however much
// room there is for bytes (a spool partition full of small files).
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <filesystem>

#include "common/fs.hpp"
#include "skip.hpp"
#include "spool/spool.hpp"
#include "spool_frames.hpp"
#include "temp_dir.hpp"

using namespace jobtrail::spool;

namespace {

// A tmpfs of a few inodes, mounted in a scratch directory for one test. `why` is why it could
// not be mounted here (not root, no CAP_SYS_ADMIN).
class FewInodes {
public:
    FewInodes() : mnt_(dir_.path() + "/mnt") {
        ::mkdir(mnt_.c_str(), 0700);
        if (::geteuid() != 0) {
            why_ = "mounting a tmpfs needs root";
        } else if (::mount("jobtrail-test", mnt_.c_str(), "tmpfs", 0, "size=4m,nr_inodes=64,mode=0700") != 0) {
            why_ = "cannot mount a tmpfs here: " + jobtrail::errno_text(errno);
        }
    }
    ~FewInodes() {
        if (why_.empty()) ::umount2(mnt_.c_str(), MNT_DETACH);
    }
    FewInodes(const FewInodes&) = delete;
    FewInodes& operator=(const FewInodes&) = delete;

    const std::string& why() const { return why_; }
    const std::string& path() const { return mnt_; }
    // Takes every inode left, with empty files.
    void fill() {
        for (;;) {
            const std::string f = mnt_ + "/filler-" + std::to_string(fillers_);
            const int fd = ::open(f.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
            if (fd < 0) {
                REQUIRE(errno == ENOSPC);
                REQUIRE(fillers_ > 0);
                return;
            }
            ::close(fd);
            ++fillers_;
        }
    }
    void release() {
        for (; fillers_ > 0; --fillers_) ::unlink((mnt_ + "/filler-" + std::to_string(fillers_ - 1)).c_str());
    }

private:
    jobtrail::test::TempDir dir_{"inodes"};
    std::string mnt_, why_;
    int fillers_ = 0;
};

// Padding that does not compress, so that records fill segments at a known pace.
Record rec(int i) {
    std::string pad(100, ' ');
    uint32_t seed = static_cast<uint32_t>(i);
    for (auto& c : pad) {
        seed = seed * 1664525u + 1013904223u;
        c = static_cast<char>('!' + (seed >> 24) % 90);
    }
    return {1'795'989'142'000'000'000 + i, "{job=\"kmsg\", node=\"n1\"}", "line " + std::to_string(i) + pad, {}};
}

std::vector<Record> read_all(Spool& s) {
    std::vector<Record> out, chunk;
    Position end;
    while (s.read(chunk, 1000, 1 << 20, end) > 0) out.insert(out.end(), chunk.begin(), chunk.end());
    return out;
}

bool same_records(const std::vector<Record>& got, int from, int to) {
    if (got.size() != static_cast<size_t>(to - from)) return false;
    for (int i = from; i < to; ++i)
        if (!(got[static_cast<size_t>(i - from)] == rec(i))) return false;
    return true;
}

}  // namespace

TEST_CASE("a spool that cannot create its first segment says so at open, and opens once it can", "[spool]") {
    FewInodes fs;
    if (!fs.why().empty()) JOBTRAIL_SKIP(fs.why());
    const std::string dir = fs.path() + "/spool";
    REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
    fs.fill();
    Spool s;
    const auto st = s.open({dir, 4096});
    CHECK_FALSE(st.ok);
    CHECK(st.error == "cannot create " + dir + "/seg-0000000000000001: " + jobtrail::errno_text(ENOSPC));
    fs.release();
    REQUIRE(s.open({dir, 4096}));
    for (int i = 0; i < 3; ++i) REQUIRE(s.append(rec(i)) == Spool::Append::kOk);
    REQUIRE(s.sync());
    CHECK(same_records(read_all(s), 0, 3));
}

TEST_CASE(
    "a segment that cannot be created at a roll: the records go on in the full one, none lost, rolled once it can",
    "[spool]") {
    FewInodes fs;
    if (!fs.why().empty()) JOBTRAIL_SKIP(fs.why());
    const std::string dir = fs.path() + "/spool";
    // The same records in a spool that has room, for what they take on disk.
    jobtrail::test::TempDir roomy;
    Spool control;
    REQUIRE(control.open({roomy.path(), 4096}));

    Spool s;
    REQUIRE(s.open({dir, 4096}));
    for (int i = 0; i < 10; ++i) {
        REQUIRE(s.append(rec(i)) == Spool::Append::kOk);
        REQUIRE(control.append(rec(i)) == Spool::Append::kOk);
    }
    REQUIRE(s.sync());
    REQUIRE(control.sync());
    fs.fill();
    // 200 records of ~130 bytes: several 4 KiB segments' worth, and no inode for a second one.
    for (int i = 10; i < 210; ++i) {
        CHECK(s.append(rec(i)) == Spool::Append::kOk);
        REQUIRE(control.append(rec(i)) == Spool::Append::kOk);
    }
    REQUIRE(s.sync());
    REQUIRE(control.sync());
    CHECK(s.error() == "cannot create " + dir + "/seg-0000000000000002: " + jobtrail::errno_text(ENOSPC));
    CHECK(count_segments(dir) == 1);
    CHECK(same_records(read_all(s), 0, 210));
    // Past the failed roll the records still share compressed runs (the roll is not tried again
    // for each, which would write and sync each in a frame of its own): no more on disk than in
    // the spool that rolled.
    CHECK(count_segments(roomy.path()) > 3);
    CHECK(s.pending_bytes() <= control.pending_bytes());

    // Once there is an inode, the roll after the next sync makes the second segment.
    fs.release();
    for (int i = 210; i < 230; ++i) REQUIRE(s.append(rec(i)) == Spool::Append::kOk);
    REQUIRE(s.sync());
    CHECK(count_segments(dir) == 2);
    CHECK(same_records(read_all(s), 210, 230));

    // Opened again (a restart): every record, once, in order, nothing cut as torn.
    Spool again;
    Spool::Recovery rv;
    REQUIRE(again.open({dir, 4096}, &rv));
    CHECK(rv.truncated_bytes == 0);
    CHECK(same_records(read_all(again), 0, 230));
}
