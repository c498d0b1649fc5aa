#include "spool/spool.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <utility>

#include "common/time.hpp"

namespace jobtrail::spool {
namespace {

bool parse_segment_name(const char* name, uint64_t& id) {
    return std::sscanf(name, "seg-%16" SCNu64, &id) == 1 && std::string_view(name).size() == 20;
}

std::string read_range(int fd, uint64_t off, size_t n) {
    std::string out(n, '\0');
    size_t got = 0;
    while (got < n) {
        const ssize_t r = ::pread(fd, out.data() + got, n - got, static_cast<off_t>(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += static_cast<size_t>(r);
    }
    out.resize(got);
    return out;
}

}  // namespace

std::string Spool::segment_path(uint64_t id) const {
    char name[32];
    std::snprintf(name, sizeof name, "/seg-%016" PRIu64, id);
    return opts_.dir + name;
}

Spool::~Spool() {
    flush_ack();  // best effort: a stale position only means records sent again
}

Status Spool::open(const Options& opts, Recovery* rec) {
    std::lock_guard<std::mutex> lk(mu_);
    if (!opts_.dir.empty() && acked_ != persisted_ack_) persist_ack();  // opened again: keep what was answered
    opts_ = opts;
    read_fd_.reset(-1);
    buf_.clear();
    run_.clear();
    broken_.clear();
    roll_failed_ = false;
    Recovery local;
    Recovery& rv = rec ? *rec : local;
    if (auto st = make_dirs(opts_.dir, 0700); !st.ok) return st;
    segments_.clear();
    if (DIR* d = ::opendir(opts_.dir.c_str())) {
        while (dirent* e = ::readdir(d)) {
            uint64_t id = 0;
            if (parse_segment_name(e->d_name, id)) segments_.push_back(id);
        }
        ::closedir(d);
    }
    std::sort(segments_.begin(), segments_.end());

    acked_ = {segments_.empty() ? 1 : segments_.front(), 0};
    if (auto text = read_small_file(opts_.dir + "/acked", 256)) {
        Position p;
        if (std::sscanf(text->c_str(), "%" SCNu64 " %" SCNu64, &p.segment, &p.offset) == 2) acked_ = p;
    }
    persisted_ack_ = acked_;
    persisted_ns_ = monotonic_ns();
    // Segments wholly before the acknowledged one are leftovers of an interrupted ack().
    while (!segments_.empty() && segments_.front() < acked_.segment) {
        ::unlink(segment_path(segments_.front()).c_str());
        segments_.erase(segments_.begin());
        ++rv.segments_removed;
    }
    durable_size_.assign(segments_.size(), 0);
    for (size_t i = 0; i < segments_.size(); ++i) {
        struct stat st {};
        if (::stat(segment_path(segments_[i]).c_str(), &st) == 0) durable_size_[i] = static_cast<uint64_t>(st.st_size);
    }
    // The last segment may end in a frame that was being written when we died: cut it off.
    if (!segments_.empty()) {
        const std::string path = segment_path(segments_.back());
        Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
        const std::string data = fd.valid() ? read_range(fd.get(), 0, durable_size_.back()) : std::string();
        size_t pos = 0;
        std::vector<RecordView> views;
        std::vector<MetadataView> md;
        std::vector<RunView> runs;
        for (;;) {
            size_t used = 0;
            views.clear();
            md.clear();
            runs.clear();
            const auto st = decode_frame(std::string_view(data).substr(pos), views, md, runs, &used);
            if (st != DecodeStatus::kOk) {
                // Whole and summed right, but of a format this build does not know: written by a
                // newer shipper. Not a torn tail to cut: those records were never sent.
                if (st == DecodeStatus::kUnknownVersion)
                    return Status::failure(path + " holds records in a newer spool format (at offset " +
                                           std::to_string(pos) +
                                           "): this jobtrail-shipper is older than the one that wrote them; "
                                           "run that version again until the spool is drained");
                break;
            }
            pos += used;
        }
        if (pos < data.size()) {
            rv.truncated_bytes = data.size() - pos;
            rv.note = "cut a torn tail of " + std::to_string(rv.truncated_bytes) + " bytes from " + path;
            if (::truncate(path.c_str(), static_cast<off_t>(pos)) != 0) {
                return Status::failure("cannot truncate " + path + ": " + errno_text(errno));
            }
            durable_size_.back() = pos;
        }
    }
    if (segments_.empty() || acked_.segment > segments_.back()) {
        // Nothing left to send: start clean at the acknowledged segment number.
        if (!start_segment(acked_.segment)) {
            return Status::failure(error_);
        }
        acked_.offset = 0;
    } else {
        write_id_ = segments_.back();
        write_fd_.reset(::open(segment_path(write_id_).c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
        if (!write_fd_.valid()) {
            return Status::failure("cannot open " + segment_path(write_id_) + ": " + errno_text(errno));
        }
        write_size_ = durable_size_.back();
    }
    pending_ = durable_after_ack();
    read_ = acked_;
    readable_end_ = {segments_.back(), durable_size_.back()};
    return {};
}

Position Spool::durable_end() const {
    std::lock_guard<std::mutex> lk(mu_);
    return {segments_.back(), durable_size_.back()};
}

void Spool::set_max_bytes(uint64_t max) {
    std::lock_guard<std::mutex> lk(mu_);
    opts_.max_bytes = max;
}

void Spool::set_readable_end(const Position& p) {
    std::lock_guard<std::mutex> lk(mu_);
    readable_end_ = p;
    readable_cv_.notify_all();
}

Status Spool::discard_after(const Position& p) {
    std::lock_guard<std::mutex> lk(mu_);
    if (p < acked_) return {};  // everything after an acknowledged point was sent already
    read_fd_.reset(-1);
    while (segments_.size() > 1 && segments_.back() > p.segment) {
        ::unlink(segment_path(segments_.back()).c_str());
        segments_.pop_back();
        durable_size_.pop_back();
    }
    if (segments_.back() == p.segment && durable_size_.back() > p.offset) {
        if (::truncate(segment_path(p.segment).c_str(), static_cast<off_t>(p.offset)) != 0) {
            return Status::failure("cannot truncate " + segment_path(p.segment) + ": " + errno_text(errno));
        }
        durable_size_.back() = p.offset;
    }
    if (write_id_ != segments_.back()) {
        write_id_ = segments_.back();
        write_fd_.reset(::open(segment_path(write_id_).c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
    }
    write_size_ = durable_size_.back();
    buf_.clear();
    run_.clear();
    pending_ = durable_after_ack();
    readable_end_ = {segments_.back(), durable_size_.back()};
    return {};
}

uint64_t Spool::durable_after_ack() const {
    uint64_t total = 0;
    for (size_t i = 0; i < segments_.size(); ++i) {
        if (segments_[i] < acked_.segment) continue;
        const uint64_t skip = segments_[i] == acked_.segment ? std::min(acked_.offset, durable_size_[i]) : 0;
        total += durable_size_[i] - skip;
    }
    return total;
}

uint64_t Spool::open_run_bound() const {
    return run_.open() ? RunBuilder::frame_bound(run_.stream(), run_.raw_size()) : 0;
}

uint64_t Spool::used_bytes() const {
    return durable_after_ack() + (write_size_ - durable_size_.back()) + open_run_bound();
}

bool Spool::start_segment(uint64_t id) {
    const std::string path = segment_path(id);
    // Opened before the old one is let go: should it fail, appending goes on in the old one.
    Fd fd(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600));
    if (!fd.valid()) {
        error_ = "cannot create " + path + ": " + errno_text(errno);
        return false;
    }
    if (read_fd_segment_ == id) read_fd_.reset(-1);  // a file of that name made anew
    write_fd_ = std::move(fd);
    write_id_ = id;
    write_size_ = 0;
    if (segments_.empty() || segments_.back() != id) {
        segments_.push_back(id);
        durable_size_.push_back(0);
    }
    // The new file's directory entry must survive a crash too.
    Fd dir(::open(opts_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir.valid()) ::fsync(dir.get());
    return true;
}

Spool::Append Spool::append(const Record& r, bool past_cap) {
    return append(RecordRef{r.ts_ns, r.stream, r.line, &r.metadata, nullptr}, past_cap);
}

Spool::Append Spool::append(const RecordRef& r, bool past_cap) {
    std::lock_guard<std::mutex> lk(mu_);
    return append_locked(r, past_cap);
}

void Spool::append_all(std::span<const RecordRef> records) {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& r : records) append_locked(r, /*past_cap=*/true);
}

Spool::Append Spool::append_locked(const RecordRef& r, bool past_cap) {
    const size_t rec = RunBuilder::entry_size(r);
    const bool joins = run_.open() && run_.stream() == r.stream && run_.raw_size() + rec <= kMaxRun;
    // What the open run takes is known only when it is closed (compressed): the cap and the
    // segment's size count it at its bound meanwhile.
    const uint64_t open_run = open_run_bound();
    uint64_t len = joins ? RunBuilder::frame_bound(r.stream, run_.raw_size() + rec) - open_run
                         : RunBuilder::frame_bound(r.stream, rec);
    // Past the segment's size it goes to the next one, in a run of its own: counted as such.
    // After a failed roll, not again before the next sync().
    const uint64_t open = write_size_ + open_run;
    const bool roll = !roll_failed_ && open > 0 && open + len > opts_.segment_bytes;
    if (roll) len = RunBuilder::frame_bound(r.stream, rec);
    if (!past_cap && used_bytes() + len > opts_.max_bytes) return Append::kFull;
    if (roll) {
        // Finish this segment (what is buffered belongs to it), then roll over. Should that
        // fail (a full disk, no descriptor left), the record goes into this segment, past its
        // size: it is kept, sync() writes it, and the roll is tried again after that.
        roll_failed_ = true;
        if (flush_buffer()) {
            if (opts_.fsync && ::fdatasync(write_fd_.get()) != 0) {
                broken_ = error_ = "fdatasync " + segment_path(write_id_) + ": " + errno_text(errno);
            } else {
                durable_size_.back() = write_size_;
                roll_failed_ = !start_segment(write_id_ + 1);
            }
        }
    }
    if (!joins || roll) {
        end_open_run();
        // Closed runs go to the kernel early (no fsync): memory stays small between syncs. A
        // failure is tried again by the next sync().
        if (buf_.size() >= kFlushBytes) write_buffer();
        run_.begin(r.stream);
    }
    run_.add(r, rec);
    return Append::kOk;
}

void Spool::end_open_run() {
    const size_t before = buf_.size();
    run_.finish(buf_);
    write_size_ += buf_.size() - before;
}

bool Spool::flush_buffer() {
    end_open_run();
    return write_buffer();
}

bool Spool::write_buffer() {
    size_t done = 0;
    while (done < buf_.size()) {
        const ssize_t n = ::write(write_fd_.get(), buf_.data() + done, buf_.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            error_ = "write to " + segment_path(write_id_) + ": " + errno_text(n < 0 ? errno : EIO);
            // What reached the file stays there: a retry (the next sync) writes only the rest,
            // or the file would hold those frames twice.
            buf_.erase(0, done);
            return false;
        }
        done += static_cast<size_t>(n);
    }
    buf_.clear();
    if (buf_.capacity() > 1 << 20) std::string().swap(buf_);  // grown for one huge record: not kept
    return true;
}

Status Spool::sync() {
    std::lock_guard<std::mutex> lk(mu_);
    roll_failed_ = false;  // the next append past the segment's size tries again
    // A failed fdatasync may not fail again (the kernel reports a lost write-back once): nothing
    // is durable from then on, until open() cuts the spool back to the caller's checkpoint.
    if (!broken_.empty()) return Status::failure(broken_ + " earlier: the spool must be opened again");
    if (!flush_buffer()) return Status::failure(error_);
    if (opts_.fsync && ::fdatasync(write_fd_.get()) != 0) {
        broken_ = error_ = "fdatasync " + segment_path(write_id_) + ": " + errno_text(errno);
        return Status::failure(error_);
    }
    durable_size_.back() = write_size_;  // the write segment is always the last
    pending_ = durable_after_ack();
    if (!opts_.gate_reads) {
        readable_end_ = {segments_.back(), durable_size_.back()};
        readable_cv_.notify_all();
    }
    return {};
}

void ReadBatch::clear() {
    // A block grown for one huge record is not kept: memory stays what steady reading needs.
    constexpr size_t kKeep = 4 << 20;
    for (auto& b : blocks_)
        if (b.cap > kKeep) b = Block{};
    used_ = 0;
    records_.clear();
    starts_.clear();
    metadata_.clear();
    runs_.clear();
    expanded_bytes_.clear();
    expanded_.clear();
    bytes_ = 0;
}

bool ReadBatch::expand(const RecordView& r, std::vector<const RecordView*>& out, std::string* why) {
    expand_scratch_.clear();
    expanded_bytes_.emplace_back();
    if (!expand_run(runs_[r.run], expanded_bytes_.back(), expand_scratch_, metadata_, why)) {
        expanded_bytes_.pop_back();
        return false;
    }
    for (const auto& v : expand_scratch_) out.push_back(&expanded_.emplace_back(v));
    return true;
}

std::string_view ReadBatch::read_block(int fd, uint64_t off, size_t n) {
    if (used_ == blocks_.size()) blocks_.emplace_back();
    Block& b = blocks_[used_++];
    if (b.cap < n) {
        // Not value-initialised: pread overwrites what is used, and zero-filling was a sixth of the cost.
        b.data.reset(new char[n]);  // NOLINT(cppcoreguidelines-owning-memory)
        b.cap = n;
    }
    size_t got = 0;
    while (got < n) {
        const ssize_t r = ::pread(fd, b.data.get() + got, n - got, static_cast<off_t>(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += static_cast<size_t>(r);
    }
    return {b.data.get(), got};
}

bool Spool::readable() const {
    if (read_.segment < readable_end_.segment) return true;
    return read_.segment == readable_end_.segment && read_.offset < readable_end_.offset;
}

bool Spool::wait_readable(int64_t timeout_ms, const std::atomic<bool>& stop) {
    std::unique_lock<std::mutex> lk(mu_);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    // Short slices: `stop` is an atomic of the caller's, set without this mutex.
    while (!readable() && !stop) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= until) break;
        readable_cv_.wait_for(
            lk, std::min<std::chrono::steady_clock::duration>(until - now, std::chrono::milliseconds(50)));
    }
    return readable();
}

size_t Spool::read(std::vector<Record>& out, size_t max_records, size_t max_bytes, Position& end) {
    ReadBatch batch;
    const size_t n = read(batch, max_records, max_bytes, end);
    std::vector<const RecordView*> views;
    for (const auto& v : batch.records()) {
        if (v.run == kNoRun) {
            views.push_back(&v);
        } else if (std::string why; !batch.expand(v, views, &why)) {
            std::lock_guard<std::mutex> lk(mu_);
            ++corrupt_skipped_;
            error_ = "a compressed run of " + std::string(v.stream) + ": " + why + "; skipped";
        }
    }
    out.resize(views.size());
    for (size_t i = 0; i < views.size(); ++i) {
        const RecordView& v = *views[i];
        Record& r = out[i];
        r.ts_ns = v.ts_ns;
        r.stream.assign(v.stream);
        r.line.assign(v.line);
        const auto md = batch.metadata(v);
        r.metadata.resize(md.size());
        for (size_t k = 0; k < md.size(); ++k) {
            r.metadata[k].first.assign(md[k].first);
            r.metadata[k].second.assign(md[k].second);
        }
    }
    return n == 0 ? 0 : views.size();
}

size_t Spool::read(ReadBatch& out, size_t max_records, size_t max_bytes, Position& end) {
    std::lock_guard<std::mutex> lk(mu_);
    out.clear();
    constexpr size_t kChunk = 1 << 20;
    size_t n = 0, bytes = 0;
    while (n < max_records && bytes < max_bytes) {
        auto it = std::lower_bound(segments_.begin(), segments_.end(), read_.segment);
        if (it == segments_.end()) break;
        const size_t idx = static_cast<size_t>(it - segments_.begin());
        if (*it != read_.segment) read_ = {*it, 0};
        if (read_.segment > readable_end_.segment) break;
        const uint64_t durable = read_.segment == readable_end_.segment
                                     ? std::min(durable_size_[idx], readable_end_.offset)
                                     : durable_size_[idx];
        if (read_.offset >= durable) {
            if (idx + 1 < segments_.size() && read_.segment < readable_end_.segment) {
                read_ = {segments_[idx + 1], 0};
                continue;
            }
            break;
        }
        const int fd = reader_fd(read_.segment);
        if (fd < 0) {
            error_ = "cannot read " + segment_path(read_.segment) + ": " + errno_text(errno);
            break;
        }
        const uint64_t left = durable - read_.offset;
        // What the byte budget can still take, and a little more for the frame that crosses it:
        // a full chunk past the budget was read only to be read again next time.
        const size_t want = static_cast<size_t>(std::min<uint64_t>({left, kChunk, max_bytes - bytes + (16 << 10)}));
        std::string_view data = out.read_block(fd, read_.offset, want);
        size_t pos = 0;
        bool skip_segment = false;
        while (n < max_records && bytes < max_bytes) {
            size_t used = 0;
            const size_t had = out.records_.size(), had_runs = out.runs_.size();
            const auto st = decode_frame(data.substr(pos), out.records_, out.metadata_, out.runs_, &used);
            if (st == DecodeStatus::kOk) {
                out.starts_.resize(out.records_.size(), Position{read_.segment, read_.offset + pos});
                pos += used;
                bytes += used;
                // A run's records come whole: at most kMaxRun over.
                n += out.runs_.size() > had_runs ? out.runs_.back().count : out.records_.size() - had;
                continue;
            }
            if (st == DecodeStatus::kNeedMore && pos == 0 && data.size() < left && data.size() >= kFrameHeader) {
                // One frame larger than what was read: read exactly that frame.
                const uint32_t len = frame_payload_length(data);
                if (len <= kMaxPayload && kFrameHeader + len <= left && kFrameHeader + len > data.size()) {
                    out.drop_last_block();
                    data = out.read_block(fd, read_.offset, kFrameHeader + len);
                    continue;
                }
            }
            if (st == DecodeStatus::kCorrupt || st == DecodeStatus::kUnknownVersion ||
                (st == DecodeStatus::kNeedMore && pos == 0 && data.size() >= left)) {
                // Damage inside durable data (a disk error): skip the rest of this segment, say so.
                // A payload version unknown here (open() checks only the last segment) is skipped so too.
                ++corrupt_skipped_;
                error_ = "corrupt record in " + segment_path(read_.segment) + " at offset " +
                         std::to_string(read_.offset + pos) + "; skipped the rest of the segment";
                skip_segment = true;
            }
            break;
        }
        read_.offset = skip_segment ? durable : read_.offset + pos;
        if (pos == 0 && !skip_segment) break;
    }
    end = read_;
    out.bytes_ = bytes;
    return n;
}

int Spool::reader_fd(uint64_t segment) {
    if (!read_fd_.valid() || read_fd_segment_ != segment) {
        read_fd_.reset(::open(segment_path(segment).c_str(), O_RDONLY | O_CLOEXEC));
        read_fd_segment_ = segment;
    }
    return read_fd_.get();
}

Status Spool::ack(const Position& pos) {
    std::lock_guard<std::mutex> lk(mu_);
    const Position before = acked_;
    acked_ = pos;
    const bool frees = segments_.size() > 1 && segments_.front() < pos.segment;
    if (frees || opts_.ack_persist_ms <= 0 || monotonic_ns() - persisted_ns_ >= opts_.ack_persist_ms * 1'000'000) {
        if (auto st = persist_ack(); !st.ok) {
            // Not moved, as if not answered: its segments stay and still count against max_bytes.
            acked_ = before;
            return st;
        }
    }
    pending_ = durable_after_ack();
    return Status::success();
}

Status Spool::flush_ack() {
    std::lock_guard<std::mutex> lk(mu_);
    if (opts_.dir.empty() || acked_ == persisted_ack_) return Status::success();
    return persist_ack();
}

Status Spool::persist_ack() {
    const std::string body = std::to_string(acked_.segment) + " " + std::to_string(acked_.offset) + "\n";
    if (auto st = write_file_atomic(opts_.dir + "/acked", body, 0600); !st.ok) {
        error_ = st.error;
        return st;
    }
    persisted_ack_ = acked_;
    persisted_ns_ = monotonic_ns();
    // Segments wholly acknowledged on disk (and not the one being written) go.
    while (segments_.size() > 1 && segments_.front() < persisted_ack_.segment) {
        if (read_fd_segment_ == segments_.front()) read_fd_.reset(-1);
        ::unlink(segment_path(segments_.front()).c_str());
        segments_.erase(segments_.begin());
        durable_size_.erase(durable_size_.begin());
    }
    return Status::success();
}

void Spool::rewind() {
    std::lock_guard<std::mutex> lk(mu_);
    read_ = acked_;
}

uint64_t Spool::pending_bytes() const {
    std::lock_guard<std::mutex> lk(mu_);
    return pending_;
}

uint64_t Spool::used_bytes_now() const {
    std::lock_guard<std::mutex> lk(mu_);
    return used_bytes();
}

Position Spool::acked() const {
    std::lock_guard<std::mutex> lk(mu_);
    return acked_;
}

}  // namespace jobtrail::spool
