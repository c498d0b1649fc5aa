#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/fs.hpp"
#include "spool/record.hpp"

namespace jobtrail::spool {

// Where a record starts in the spool: segment number and byte offset.
struct Position {
    uint64_t segment = 0;
    uint64_t offset = 0;
    auto operator<=>(const Position&) const = default;  // NOLINT(modernize-use-nullptr): clang-tidy 14 bug
};

struct Options {
    std::string dir;                       // e.g. /var/lib/jobtrail/spool
    uint64_t segment_bytes = 16ULL << 20;  // a new segment file past this size
    uint64_t max_bytes = 1ULL << 30;       // unacknowledged bytes on disk; past it append() says full
    // When set, read() sees only what set_readable_end() allowed (the shipper's commit point);
    // otherwise everything synced.
    bool gate_reads = false;
    // Off: no fdatasync; a crash can lose what was read but not yet sent. For measuring what
    // durability costs, and for nodes that accept that loss.
    bool fsync = true;
    // The acknowledged position goes to disk at most this often (0: at every ack), and always
    // before a segment is deleted and at close. A crash re-sends at most this long's acknowledged
    // records, byte-identical, which Loki keeps once; each write is a file, an fsync and a rename.
    int64_t ack_persist_ms = 0;
};

// What one Spool::read() hands out without copying: the records decoded in place, viewing the
// chunks of the segment files read for them. Valid until the next read into it or clear(). Reused
// from read to read it keeps its buffers (a block of a huge record is let go), so steady reading
// neither allocates nor zero-fills.
class ReadBatch {
public:
    // In the spool's order; a compressed run is one of them (r.run != kNoRun), its records whole
    // in run(r), or as records through expand().
    const std::vector<RecordView>& records() const { return records_; }
    const RunView& run(const RecordView& r) const { return runs_[r.run]; }
    // A compressed run's records, decompressed into this batch (they live as long as it does),
    // their addresses appended to out. False (and why) if the run is damaged.
    bool expand(const RecordView& r, std::vector<const RecordView*>& out, std::string* why = nullptr);
    std::span<const MetadataView> metadata(const RecordView& r) const {
        return std::span<const MetadataView>(metadata_).subspan(r.metadata_begin, r.metadata_count);
    }
    // Where the frame that holds records()[i] starts: everything before it is of earlier records,
    // so a reader acknowledged up to it reads that record again, and nothing before.
    const Position& frame_start(size_t i) const { return starts_[i]; }
    size_t size() const { return records_.size(); }
    bool empty() const { return records_.empty(); }
    uint64_t bytes() const { return bytes_; }  // of the spool's frames read
    void clear();

private:
    friend class Spool;
    struct Block {
        std::unique_ptr<char[]> data;
        size_t cap = 0;
    };
    // Reads n bytes at off into the next block; the bytes it got.
    std::string_view read_block(int fd, uint64_t off, size_t n);
    void drop_last_block() { --used_; }

    std::vector<Block> blocks_;
    size_t used_ = 0;
    std::vector<RecordView> records_;
    std::vector<Position> starts_;  // per record, its frame's start
    std::vector<MetadataView> metadata_;
    std::vector<RunView> runs_;
    // Runs expanded: deques, so what was handed out stays where it is.
    std::deque<std::string> expanded_bytes_;
    std::deque<RecordView> expanded_;
    std::vector<RecordView> expand_scratch_;
    uint64_t bytes_ = 0;
};

// The shipper's disk queue. Sources append records and sync() before they move their own
// checkpoints; the sender reads from the acknowledged position onwards and ack()s what Loki
// answered for. Records are kept in one global order, so per stream the oldest goes first and
// nothing overtakes a backlog. After a crash, open() cuts a torn tail (partial or corrupt last
// frame) and reading resumes at the last acknowledged position: what follows is re-sent
// byte-identical, and Loki drops the duplicates. Memory use does not depend on the backlog.
class Spool {
public:
    struct Recovery {
        uint64_t truncated_bytes = 0;   // torn tail cut off at open
        uint64_t segments_removed = 0;  // fully acknowledged leftovers
        std::string note;
    };

    Spool() = default;
    Spool(const Spool&) = delete;
    Spool& operator=(const Spool&) = delete;
    Spool(Spool&&) = delete;
    Spool& operator=(Spool&&) = delete;
    ~Spool();  // persists the last acknowledged position (flush_ack)

    Status open(const Options& opts, Recovery* rec = nullptr);

    enum class Append { kOk, kFull };
    // Buffers a record for the current segment; durable only after sync().
    // past_cap: taken even over max_bytes (what was read must go somewhere durable; the caller
    // stops reading when the spool is full, so this is at most one pass over).
    Append append(const Record& r, bool past_cap = false);
    Append append(const RecordRef& r, bool past_cap = false);
    // A source's whole pass under one lock, each record taken as append(r, past_cap=true) would:
    // the caller checked there is room for a pass before reading it.
    void append_all(std::span<const RecordRef> records);
    // Writes buffered records and fdatasyncs them; fails on an I/O error (also kept in error()).
    Status sync();

    // Reads up to max_records / max_bytes durable records from the read cursor onwards into
    // `out` (replacing its contents, reusing its elements' storage); returns how many; `end` is where the next read
    // continues (pass it to ack() once Loki answered).
    size_t read(std::vector<Record>& out, size_t max_records, size_t max_bytes, Position& end);
    // The same into views (the sender's way: no copy per record).
    size_t read(ReadBatch& out, size_t max_records, size_t max_bytes, Position& end);
    // Waits up to timeout_ms (less if stop is set meanwhile) until read() has something; true if so.
    // Woken at once when the readable end moves (sync() or set_readable_end()).
    bool wait_readable(int64_t timeout_ms, const std::atomic<bool>& stop);
    // Everything before `pos` is acknowledged: no longer pending at once; persisted (and segments
    // wholly before it deleted) when a segment can go or ack_persist_ms has passed.
    Status ack(const Position& pos);
    // Persists the acknowledged position now if it moved since it was last persisted.
    Status flush_ack();
    // Read again from the acknowledged position (after a failed send).
    void rewind();

    // Where durable data ends now (after sync()).
    Position durable_end() const;
    // read() stops here: records after it are durable but not yet covered by the sources'
    // committed checkpoint, and may be discarded at the next start.
    void set_readable_end(const Position& p);
    // At start: drops durable records after p (the sources will read them again).
    Status discard_after(const Position& p);

    uint64_t pending_bytes() const;   // durable, not yet acknowledged
    uint64_t used_bytes_now() const;  // what counts against max_bytes: pending plus not yet synced
    Position acked() const;
    const std::string& error() const { return error_; }
    // A write-back failed: nothing more is durable in this Spool; open() it again (after a
    // restart, the sources re-read from their checkpoint).
    bool broken() const {
        std::lock_guard<std::mutex> lk(mu_);
        return !broken_.empty();
    }
    uint64_t corrupt_skipped() const { return corrupt_skipped_; }

private:
    std::string segment_path(uint64_t id) const;
    bool start_segment(uint64_t id);
    bool flush_buffer();                                      // closes the open run, then write_buffer()
    bool write_buffer();                                      // what buf_ holds to the file (no fsync)
    Append append_locked(const RecordRef& r, bool past_cap);  // callers hold mu_
    uint64_t durable_after_ack() const;                       // callers hold mu_
    bool readable() const;                                    // callers hold mu_
    uint64_t open_run_bound() const;                          // what the open run's frame may take; callers hold mu_
    uint64_t used_bytes() const;      // durable after ack + written, buffered or in the open run since the last sync
    Status persist_ack();             // callers hold mu_
    int reader_fd(uint64_t segment);  // the read cursor's segment, opened once; callers hold mu_

    mutable std::mutex mu_;
    std::condition_variable readable_cv_;
    Options opts_;
    std::vector<uint64_t> segments_;      // ids on disk, ascending
    std::vector<uint64_t> durable_size_;  // per segment, bytes known durable
    Fd write_fd_;
    uint64_t write_id_ = 0;
    uint64_t write_size_ = 0;  // including buffered bytes
    std::string buf_;
    // The run being built: consecutive records of one stream share a compressed frame, closed
    // (compressed into buf_) when the stream changes, at kMaxRun, and before buf_ is written.
    // 64 KiB: snappy's block, so a run compresses as well as the whole request would.
    static constexpr size_t kMaxRun = 64 << 10;
    RunBuilder run_;
    // buf_ goes to the kernel past this (no fsync): a bigger buffer saved no measurable syscall
    // time and was a megabyte more of the shipper's memory.
    static constexpr size_t kFlushBytes = 256 << 10;
    void end_open_run();
    Position acked_;
    Position persisted_ack_;  // what the acked file says
    int64_t persisted_ns_ = 0;
    // The segment read() reads, kept open across reads; let go before any file of that name is
    // removed, cut back or made anew.
    Fd read_fd_;
    uint64_t read_fd_segment_ = 0;
    Position read_;
    Position readable_end_;
    uint64_t pending_ = 0;  // durable bytes after acked_
    uint64_t corrupt_skipped_ = 0;
    std::string error_;
    std::string broken_;        // a failed fdatasync: every sync() fails until open()
    bool roll_failed_ = false;  // not tried again before the next sync()
};

}  // namespace jobtrail::spool
