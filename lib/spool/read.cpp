// The spool's read side: batches of records from the acknowledged position on, as the sender reads them.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "common/time.hpp"
#include "spool/spool.hpp"

namespace jobtrail::spool {

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

}  // namespace jobtrail::spool
