#include "forensics/staging_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <vector>

namespace jobtrail::forensics {
namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
constexpr int kMaxDepth = 16;  // the bundle's paths are three deep (nccl/<node>/<file>)

Fd dup_fd(int fd) {
    return Fd(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
}

bool same_file(const struct stat& a, const struct stat& b) {
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// The names in the directory open as dirfd, read through a descriptor of its own (readdir's
// offset is not shared with dirfd's).
std::optional<std::vector<std::string>> names_in(int dirfd) {
    Fd self(::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!self.valid()) return std::nullopt;
    DIR* d = ::fdopendir(self.get());
    if (d == nullptr) return std::nullopt;
    self.release();
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
    return names;
}

// Removes everything in the directory open as dirfd, depth first, each entry relative to its
// own directory's descriptor and never through a link: nothing outside it can go.
void empty_dir(int dirfd, int depth) {
    for (const auto& n : names_in(dirfd).value_or(std::vector<std::string>{})) {
        struct stat st {};
        if (::fstatat(dirfd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (!S_ISDIR(st.st_mode)) {
            ::unlinkat(dirfd, n.c_str(), 0);
            continue;
        }
        if (depth < kMaxDepth)
            if (Fd sub(::openat(dirfd, n.c_str(), kDirFlags)); sub.valid()) empty_dir(sub.get(), depth + 1);
        ::unlinkat(dirfd, n.c_str(), AT_REMOVEDIR);
    }
}

}  // namespace

// --- OutputFile ---------------------------------------------------------------------------------

OutputFile::~OutputFile() {
    discard();
}

Result<OutputFile> OutputFile::create(int dirfd, const std::string& dir, const std::string& name, mode_t mode) {
    OutputFile f;
    f.dir_fd_ = dup_fd(dirfd);
    if (!f.dir_fd_.valid()) return Status::failure("cannot use " + dir + ": " + errno_text(errno));
    // A hidden name while it is being written: nobody takes half an archive for a bundle.
    auto fd = create_temp_at(f.dir_fd_.get(), "." + name, mode, f.tmp_);
    if (!fd.ok) return Status::failure("in " + dir + ": " + fd.error);
    f.fd_ = std::move(fd.value);
    f.dir_ = dir;
    f.name_ = name;
    return f;
}

Status OutputFile::publish() {
    const std::string where = dir_ + "/" + name_;
    struct stat ours {
    }, there{};
    // Someone who can write the directory could have put their own file at the temporary name:
    // only ours is renamed onto the name we promised.
    if (::fstat(fd_.get(), &ours) != 0 || ::fstatat(dir_fd_.get(), tmp_.c_str(), &there, AT_SYMLINK_NOFOLLOW) != 0 ||
        !same_file(ours, there)) {
        // The message first: discard() forgets the temporary name.
        auto st = Status::failure("cannot write " + where + ": its temporary file " + dir_ + "/" + tmp_ +
                                  " was removed or replaced while it was written");
        discard();
        return st;
    }
    if (::renameat(dir_fd_.get(), tmp_.c_str(), dir_fd_.get(), name_.c_str()) != 0) {
        auto st = Status::failure("cannot rename " + dir_ + "/" + tmp_ + " to " + where + ": " + errno_text(errno));
        discard();
        return st;
    }
    tmp_.clear();
    fd_.reset();
    return {};
}

void OutputFile::discard() {
    if (dir_fd_.valid() && !tmp_.empty()) ::unlinkat(dir_fd_.get(), tmp_.c_str(), 0);
    tmp_.clear();
    fd_.reset();
}

// --- StagingDir ---------------------------------------------------------------------------------

StagingDir::~StagingDir() {
    remove();
}

Result<StagingDir> StagingDir::create(const std::string& out_dir, const std::string& prefix) {
    StagingDir s;
    s.out_dir_ = out_dir;
    // The operator's own path, followed as given, and opened once: what is made below it is
    // reached through this descriptor, never through the path again.
    s.out_fd_.reset(::open(out_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    int err = errno;
    if (!s.out_fd_.valid() && err == ENOENT) {
        std::error_code ec;
        std::filesystem::create_directories(out_dir, ec);
        if (ec) return Status::failure("cannot create the output directory " + out_dir + ": " + ec.message());
        s.out_fd_.reset(::open(out_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        err = errno;
    }
    if (!s.out_fd_.valid())
        return Status::failure("cannot open the output directory " + out_dir + ": " + errno_text(err));

    // mkdtemp's way, relative to the descriptor: a name nobody can guess, and a directory that
    // already exists (planted, full of links) is never taken for ours.
    const std::string failed = "cannot create a staging directory in " + out_dir + ": ";
    for (int attempt = 0;; ++attempt) {
        s.name_ = temp_name(prefix) + ".partial";
        if (::mkdirat(s.out_fd_.get(), s.name_.c_str(), 0700) == 0) break;
        if (errno != EEXIST || attempt == 15) return Status::failure(failed + errno_text(errno));
    }
    s.path_ = out_dir + "/" + s.name_;
    Fd fd(::openat(s.out_fd_.get(), s.name_.c_str(), kDirFlags));
    struct stat st {};
    if (!fd.valid() || ::fstat(fd.get(), &st) != 0) {
        err = errno;
        ::unlinkat(s.out_fd_.get(), s.name_.c_str(), AT_REMOVEDIR);
        return Status::failure(failed + "cannot open " + s.path_ + ": " + errno_text(err));
    }
    // Between mkdirat and openat, whoever can write out_dir could have renamed ours away and put
    // another there (theirs, or one of root's they can move): only an empty one of our uid will
    // do, as ours is; emptying it at the end then removes nothing of anyone's.
    const auto names = names_in(fd.get());
    if (st.st_uid != ::geteuid() || !names || !names->empty())
        return Status::failure(failed + s.path_ + " was replaced by another directory as it was made");
    ::fchmod(fd.get(), 0700);  // whatever the umask: only we can enter it
    s.fd_ = std::move(fd);
    return s;
}

void StagingDir::remove() {
    if (!fd_.valid()) return;
    empty_dir(fd_.get(), 0);
    struct stat ours {
    }, there{};
    // Only the directory we made: another may have been put at its name since.
    if (::fstat(fd_.get(), &ours) == 0 && ::fstatat(out_fd_.get(), name_.c_str(), &there, AT_SYMLINK_NOFOLLOW) == 0 &&
        same_file(ours, there))
        ::unlinkat(out_fd_.get(), name_.c_str(), AT_REMOVEDIR);
    fd_.reset();
}

Result<Fd> StagingDir::parent_of(const std::string& rel, bool make, std::string& leaf) const {
    Fd dir = dup_fd(fd_.get());
    if (!dir.valid()) return Status::failure("cannot use " + path_ + ": " + errno_text(errno));
    size_t at = 0;
    for (size_t slash; (slash = rel.find('/', at)) != std::string::npos; at = slash + 1) {
        const std::string c = rel.substr(at, slash - at);
        Fd sub(::openat(dir.get(), c.c_str(), kDirFlags));
        if (!sub.valid() && errno == ENOENT && make) {
            if (::mkdirat(dir.get(), c.c_str(), 0700) != 0 && errno != EEXIST)
                return Status::failure("cannot create " + path_ + "/" + rel.substr(0, slash) + ": " +
                                       errno_text(errno));
            sub.reset(::openat(dir.get(), c.c_str(), kDirFlags));
        }
        if (!sub.valid())
            return Status::failure("cannot open " + path_ + "/" + rel.substr(0, slash) + ": " + errno_text(errno));
        dir = std::move(sub);
    }
    leaf = rel.substr(at);
    return dir;
}

Result<Fd> StagingDir::create_file(const std::string& rel) {
    std::string leaf;
    auto dir = parent_of(rel, true, leaf);
    if (!dir.ok) return dir;
    Fd fd(::openat(dir.value.get(), leaf.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid()) return Status::failure("cannot create " + path_ + "/" + rel + ": " + errno_text(errno));
    return fd;
}

Result<Fd> StagingDir::open_file(const std::string& rel, int flags) const {
    std::string leaf;
    auto dir = parent_of(rel, false, leaf);
    if (!dir.ok) return dir;
    Fd fd(::openat(dir.value.get(), leaf.c_str(), flags | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) return Status::failure("cannot open " + path_ + "/" + rel + ": " + errno_text(errno));
    return fd;
}

Status StagingDir::write_file(const std::string& rel, std::string_view content) {
    auto fd = create_file(rel);
    if (!fd.ok) return fd;
    if (!write_all(fd.value.get(), content))
        return Status::failure("cannot write " + path_ + "/" + rel + ": " + errno_text(errno));
    return {};
}

Result<OutputFile> StagingDir::create_output(const std::string& name, mode_t mode) const {
    return OutputFile::create(out_fd_.get(), out_dir_, name, mode);
}

// --- streams ------------------------------------------------------------------------------------

Result<File> open_stream(Fd fd, const char* mode, const std::string& what) {
    FILE* f = ::fdopen(fd.get(), mode);
    if (f == nullptr) return Status::failure("cannot open " + what + ": " + errno_text(errno));
    fd.release();
    return File(f);
}

LineReader::~LineReader() {
    std::free(buf_);
}

bool LineReader::next(std::string& line) {
    ssize_t n = ::getline(&buf_, &cap_, f_);
    if (n < 0) return false;
    if (n > 0 && buf_[n - 1] == '\n') --n;
    line.assign(buf_, static_cast<size_t>(n));
    return true;
}

}  // namespace jobtrail::forensics
