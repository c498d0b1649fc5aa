#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/fs.hpp"
#include "common/time.hpp"
#include "shipper/sources/file/config.hpp"
#include "shipper/sources/file/cri.hpp"
#include "shipper/sources/file/labels.hpp"
#include "shipper/sources/file/metrics.hpp"
#include "shipper/sources/file/mounts.hpp"
#include "shipper/sources/file/watch.hpp"
#include "shipper/sources/source.hpp"

namespace jobtrail::shipper {

// How a file source runs beyond its config section, from FileKind::build or a kind of source
// built on it (pods/). Each has its default: a caller names what it changes.
struct FileSourceOptions {
    NodeInfo node{};
    uint64_t max_line = config::ShipperConfig().max_line_bytes;  // longer lines are cut with a marker
    Events events{};
    int64_t idle_ms = 2000;           // a last line without newline waits this long for it
    int64_t scan_interval_ms = 1000;  // how often the globs are listed again (new files appear within it)
    Labeler labeler{};                // names each file's stream; empty: the node contract's
    // The shipper's node, line cap and events.
    static FileSourceOptions of(const SourceContext& c) {
        return {.node = c.node, .max_line = c.cfg.shipper.max_line_bytes, .events = c.events};
    }
};

// Tails files matching globs. A file is known by device, inode and a fingerprint of its first
// bytes (an inode reused by a new file is a new file). Rename rotation: the old file is read to
// its end through the open descriptor. copytruncate: a file shorter than our position starts
// again at 0. A last line without newline waits for it, or for idle_ms. Lines longer than
// max_line are cut with a marker; invalid UTF-8 becomes U+FFFD and NUL bytes show as \x00.
// Bounded against a job's user: files tracked per source, directory and owner; descriptors held
// (idle files are closed, their position kept, and opened again when they change); bytes of
// unterminated lines held across all files (past it the longest are shipped as lines).
// Its member functions are defined by job: scan.cpp, moves.cpp, labels.cpp, descriptors.cpp,
// line_reader.cpp, line_formats.cpp, checkpoint.cpp, and the pass itself in file_source.cpp.
class FileSource : public Source {
public:
    FileSource(FileSourceConfig cfg, FileSourceOptions o, Metrics& m);
    const std::string& name() const override { return cfg_.name; }
    node::StreamKind kind() const override { return cfg_.stream; }
    bool poll(std::vector<Event>& out, size_t max_bytes) override;
    nlohmann::json checkpoint() const override;
    void restore(const nlohmann::json& state) override;
    void flush_partial(std::vector<Event>& out) override;
    int64_t backlog_bytes() const override { return backlog_; }
    void recycle(std::vector<Event>& done) override;
    int wake_fd() const override { return watch_.fd(); }
    void woken() override { watch_.drain(); }

private:
    struct Tracked {
        std::string path;
        dev_t dev = 0;
        ino_t ino = 0;
        std::string fingerprint;
        Fd fd;
        uint64_t read_off = 0;     // next byte to read
        uint64_t emitted_off = 0;  // end of the last complete line handed out
        std::string partial;       // bytes after emitted_off, without newline yet
        cri::Joiner cri{0};        // CRI "P" pieces waiting for their "F"
        int64_t last_growth_ns = 0;
        uid_t uid = 0;
        // While closed: its size and mtime when last seen (a change means open it again), and
        // whether it has bytes to read, waiting for a descriptor.
        uint64_t size = 0;
        struct timespec mtime {};
        int64_t opened_ns = 0, closed_ns = 0;  // under the descriptor cap, files take turns
        bool stale = false;
        bool seen = true;                           // matched the globs in the last scan
        std::string phase, nccl_prefix, file_name;  // what its lines need (FileStream)
        std::shared_ptr<const Origin> origin;
        Rfc3339Parser stamps;  // its NCCL lines' timestamps
        // Lines that carry their own stamp (NCCL, CRI): the last stamp and how many lines in a
        // row had it (own_time). Checked once against what a checkpoint saved (run_checked).
        int64_t run_stamp = 0;
        uint64_t run_count = 0;
        bool run_checked = false;
    };
    using Files = std::map<std::string, Tracked>;

    // scan.cpp: the globs' directories listed one by one, new files adopted or refused within
    // the limits.
    struct ScanPass;
    void scan();
    void walk_pattern(ScanPass& p, const std::string& pattern);
    void walk(ScanPass& p, int dfd, const std::string& dir, dev_t dev, const std::vector<std::string>& comps, size_t i);
    void enter(ScanPass& p, int dfd, const std::string& dir, dev_t dev, const std::string& name,
               const std::vector<std::string>& comps, size_t i);
    void list_files(ScanPass& p, int dfd, const std::string& dir, dev_t dev, const std::string& pattern);
    void look_again(int dfd, Tracked& t);  // a tracked file by its name, in a directory not listed
    void unlistable(ScanPass& p, const std::string& dir, int err);
    void refuse_dir(ScanPass& p, const std::string& path, const std::string& why, const char* reason, bool keep);
    // One file the listing found: tracked already, adopted, or refused.
    void scan_path(ScanPass& p, const std::string& path, const struct stat& st);
    void say_refused();
    bool adopt(const std::string& path, const struct stat& st, bool seen, FileStream stream);
    bool refuse(const std::string& path, const SafeFile& f, ino_t ino);
    // moves.cpp: files renamed away from the globs, found again by inode beside their old name.
    void find_renamed();
    void find_moved();
    // labels.cpp: a file's stream, from its labeler.
    FileStream stream_of(const std::string& path) const;
    void label(Tracked& t, FileStream s);
    // descriptors.cpp: at most cfg_.max_open_files held, idle files closed and opened again.
    void close_file(Tracked& t);
    enum class Reopen { kOk, kGone, kOther, kRefused };
    Reopen reopen(Tracked& t, SafeFile& f);
    void make_room();
    Files::iterator forget(Files::iterator it);  // erases, closing its descriptor
    // Idle past release_after: forgotten from the slots, its checkpoint kept in released_.
    Files::iterator release_file(Files::iterator it);
    // line_reader.cpp: bytes into lines, partial lines held and cut.
    void read_file(Tracked& t, std::vector<Event>& out, size_t& budget);
    void take_partial(Tracked& t, std::vector<Event>& out);
    void cut_partials(std::vector<Event>& out, uint64_t held);
    // line_formats.cpp: a line into an event, by cfg_.format.
    void emit_line(Tracked& t, std::string_view line, std::vector<Event>& out);
    void emit_cri(Tracked& t, cri::Joiner::Joined j, std::vector<Event>& out);
    void drain_cri(Tracked& t, std::vector<Event>& out);  // held P pieces, as they are
    void finish_line(Event e, std::string line, std::vector<Event>& out);
    // A line's time from its own stamp: the stamp, or the next free nanosecond after the lines
    // before it in the file with the same stamp (Loki keeps one entry per stream, time and line).
    int64_t own_time(Tracked& t, int64_t stamp);
    void cut_long(std::string& line);  // past max_line, with a marker

    static std::string key_of(dev_t dev, ino_t ino) { return std::to_string(dev) + ":" + std::to_string(ino); }
    static std::string dir_of(const std::string& path) { return path.substr(0, path.rfind('/')); }
    static bool same_time(const struct timespec& a, const struct timespec& b) {
        return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
    }

    FileSourceConfig cfg_;
    NodeInfo node_;
    uint64_t max_line_;
    FileSourceMetrics& m_;
    Drops& drops_;
    int64_t idle_ns_;
    Files files_;                                                    // by dev:ino
    std::map<std::string, std::pair<std::string, uint64_t>> saved_;  // dev:ino -> (fingerprint, offset)
    // dev:ino -> path when saved. Each scan drops what is kept of a file gone (scan.cpp).
    std::map<std::string, std::string> saved_paths_;
    // CRI files saved while P pieces were held (their offset is the earliest held piece's):
    // the end of what was handed out, and each held stream's start (cri.hpp, replay).
    std::map<std::string, std::pair<uint64_t, std::array<int64_t, 2>>> saved_cri_;
    // Files saved in the middle of a run of lines with one stamp: where (fingerprint, offset),
    // the stamp and how many lines had it, for own_time to go on counting after a restart.
    struct SavedRun {
        std::string fp;
        uint64_t offset = 0;
        int64_t stamp = 0;
        uint64_t count = 0;
    };
    std::map<std::string, SavedRun> saved_runs_;
    // Refused paths are counted once while they keep matching (last scan's, and this scan's), and
    // the same entry is not opened again: a user's hundred thousand links cost one lstat each.
    struct Refused {
        Refusal why;
        ino_t ino;
    };
    std::map<std::string, Refused> refused_, refused_now_;
    size_t said_now_ = 0, unsaid_now_ = 0;  // refusals said one by one in this scan, and the rest
    int64_t scan_interval_ns_ = 0;
    int64_t last_scan_ns_ = 0;
    Events events_;
    Labeler labeler_;
    bool first_scan_ = true;
    MountPoints mounts_;
    // Job directories as last listed: one whose mtime and ctime did not change is not listed
    // again (its owner can set the mtime back with touch -d; the ctime only the kernel sets).
    struct DirState {
        dev_t dev = 0;
        ino_t ino = 0;
        struct timespec mtime {
        }, ctime{};
        size_t tracked = 0;    // files tracked in it after the listing
        bool limited = false;  // it had files refused for a limit: listed again once a slot is freed
        uint64_t freed = 0;    // freed_ then
    };
    std::map<std::string, DirState> dirs_, dirs_now_;
    // Directories (and mount points) not read, with why: said and counted once, tried each scan.
    std::map<std::string, std::string> dir_refused_, dir_refused_now_;
    uint64_t freed_ = 0;  // files forgotten or released so far (slots freed)
    // Files released after release_after idle (a finished job's): not tracked, no slot held, but
    // known by their size and mtime; one that changes is tracked again from its checkpoint.
    struct Released {
        std::string path, fingerprint;
        uint64_t offset = 0, size = 0;
        struct timespec mtime {};
        bool seen = true;  // matched in the last scan
        uid_t uid = 0;     // its owner, whose share of released files it takes
    };
    // By dev:ino, at most max_files_per_owner per owner, max_files of root's (each is in the
    // checkpoint).
    std::map<std::string, Released> released_;
    size_t over_limit_now_ = 0;               // files newly refused for a limit in this scan
    std::map<uid_t, size_t> owner_over_now_;  // and for their owner's share, by owner
    int64_t backlog_ = 0;
    size_t open_ = 0;  // descriptors held, at most cfg_.max_open_files
    int64_t idle_close_ns_ = 0;
    int64_t release_ns_ = 0;
    // Unterminated lines cut under max_partial_bytes and not said yet (one line per 10 s).
    uint64_t cut_unsaid_ = 0, cut_bytes_unsaid_ = 0;
    int64_t cut_said_ns_ = 0;
    std::vector<std::string> spare_lines_;  // buffers of spooled lines, for the next ones
    size_t spare_bytes_ = 0;                // their capacity
    DirWatch watch_;                        // the directories of tracked files
};

}  // namespace jobtrail::shipper
