// The spool opened: its segments found and recovered as a crash left them, new segments started.
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
        for (;;) {
            size_t used = 0;
            std::vector<RecordView> views;  // one frame's: decode_frame appends
            std::vector<MetadataView> md;
            std::vector<RunView> runs;
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

}  // namespace jobtrail::spool
