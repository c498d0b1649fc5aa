#include "forensics/bundle/staging.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <vector>

#include "common/fs.hpp"
#include "common/text.hpp"
#include "common/time.hpp"
#include "forensics/bundle/names.hpp"

namespace jobtrail::forensics::bundle {

void Staging::write(const std::string& rel, int64_t ts, std::string_view line) {
    if (!clean_relative_path(rel)) throw std::runtime_error("refusing to stage " + escape_line(rel));
    std::lock_guard<std::mutex> lk(mu_);
    auto it = open_.find(rel);
    if (it == open_.end()) {
        if (open_.size() >= 128) close_all();  // bounded file handles; reopened in append mode
        File f = files_.count(rel) ? stream(rel, O_WRONLY | O_APPEND, "a") : stream(rel, O_CREAT, "w");
        it = open_.emplace(rel, std::move(f)).first;
        files_.insert(rel);
    }
    put(it->second.get(), {format_rfc3339_ns(ts), " ", line, "\n"}, path_of(rel));
    int64_t& last = last_[rel];
    if (ts < last) unordered_.insert(rel);
    last = std::max(last, ts);
}

void Staging::put(FILE* f, std::initializer_list<std::string_view> parts, const std::string& what) {
    for (const auto p : parts)
        if (std::fwrite(p.data(), 1, p.size(), f) != p.size())
            throw std::runtime_error("cannot write " + what + ": " + errno_text(errno));
}

void Staging::finish(FILE* f, const std::string& what) {
    if (std::fflush(f) != 0 || std::ferror(f))
        throw std::runtime_error("cannot write " + what + ": " + errno_text(errno));
}

void Staging::close_all() {
    for (auto& [rel, f] : open_) finish(f.get(), path_of(rel));
    open_.clear();
}

void Staging::close() {
    std::lock_guard<std::mutex> lk(mu_);
    close_all();
    for (const auto& rel : unordered_) sort_file(rel);
    unordered_.clear();
}

File Staging::stream(const std::string& rel, int flags, const char* mode) const {
    auto fd = (flags & O_CREAT) ? dir_.create_file(rel) : dir_.open_file(rel, flags);
    if (!fd.ok) throw std::runtime_error(fd.error);
    auto f = open_stream(std::move(fd.value), mode, dir_.path() + "/" + rel);
    if (!f.ok) throw std::runtime_error(f.error);
    return std::move(f.value);
}

// Stable: a kmsg-dict line stays after its record. The file is one job's lines of one node,
// rewritten in place through its descriptor.
void Staging::sort_file(const std::string& rel) {
    const File f = stream(rel, O_RDWR, "r+");
    std::vector<std::string> lines;
    LineReader in(f.get());
    for (std::string l; in.next(l);) lines.push_back(std::move(l));
    std::stable_sort(lines.begin(), lines.end(),
                     [](const std::string& a, const std::string& b) { return a.compare(0, 30, b, 0, 30) < 0; });
    std::rewind(f.get());
    if (::ftruncate(::fileno(f.get()), 0) != 0)
        throw std::runtime_error("cannot rewrite " + path_of(rel) + ": " + errno_text(errno));
    for (const auto& l : lines) put(f.get(), {l, "\n"}, path_of(rel));
    finish(f.get(), path_of(rel));
}

}  // namespace jobtrail::forensics::bundle
