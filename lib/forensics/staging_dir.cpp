#include "forensics/staging_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
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

// The output directory, walked from / (or the working directory) a component at a time, made
// where missing when `make`. A link is followed only when root or we own it: the one a user put
// on the way is theirs to point anywhere. ELOOP past 40 links, as the kernel.
Result<Fd> open_output_dir(const std::string& path, bool make) {
    const uid_t me = ::geteuid();
    Fd dir(::open(!path.empty() && path[0] == '/' ? "/" : ".", kDirFlags));
    if (!dir.valid()) return Status::failure(errno_text(errno));
    std::vector<std::string> pending;  // components left, the next last
    auto push_path = [&pending](const std::string& p) {
        std::vector<std::string> parts;
        for (size_t at = 0; at <= p.size();) {
            const size_t slash = std::min(p.find('/', at), p.size());
            if (slash > at) parts.push_back(p.substr(at, slash - at));
            at = slash + 1;
        }
        pending.insert(pending.end(), parts.rbegin(), parts.rend());
    };
    push_path(path);
    std::string walked = path.empty() || path[0] != '/' ? "." : "";
    for (int links = 0; !pending.empty();) {
        const std::string c = pending.back();
        pending.pop_back();
        if (c == ".") continue;
        struct stat st {};
        if (::fstatat(dir.get(), c.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno != ENOENT || !make || (::mkdirat(dir.get(), c.c_str(), 0777) != 0 && errno != EEXIST))
                return Status::failure(errno_text(errno));
            if (::fstatat(dir.get(), c.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
                return Status::failure(errno_text(errno));
        }
        walked += "/" + c;
        if (S_ISLNK(st.st_mode)) {
            if (st.st_uid != 0 && st.st_uid != me)
                return Status::failure(walked + " is a symbolic link owned by uid " + std::to_string(st.st_uid) +
                                       ", not followed: give the directory it points to, if it is the one meant");
            if (++links > 40) return Status::failure(errno_text(ELOOP));
            std::string target(4096, '\0');
            const ssize_t n = ::readlinkat(dir.get(), c.c_str(), target.data(), target.size());
            if (n <= 0 || static_cast<size_t>(n) >= target.size()) return Status::failure(errno_text(errno));
            target.resize(static_cast<size_t>(n));
            // What is walked next is named from the link's target on, not below the link: from /,
            // or from the link's own directory.
            walked.resize(walked.size() - c.size() - 1);
            if (target[0] == '/') {
                dir.reset(::open("/", kDirFlags));
                walked.clear();
            }
            if (!dir.valid()) return Status::failure(errno_text(errno));
            push_path(target);
            continue;
        }
        Fd sub(::openat(dir.get(), c.c_str(), kDirFlags));
        if (!sub.valid()) return Status::failure(errno_text(errno));
        dir = std::move(sub);
    }
    struct stat st {};
    if (::fstat(dir.get(), &st) != 0) return Status::failure(errno_text(errno));
    if (st.st_uid != 0 && st.st_uid != me)
        return Status::failure("it is owned by uid " + std::to_string(st.st_uid) +
                               ", who could replace the bundle there; give a directory of root's or ours");
    if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
        return Status::failure(
            "anyone can write it and it has no sticky bit, so anyone could replace the bundle "
            "there; give another, or chmod +t it");
    return dir;
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
    // Opened once: what is made below it is reached through this descriptor, never the path.
    auto dir = open_output_dir(out_dir, true);
    if (!dir.ok) return Status::failure("cannot use the output directory " + out_dir + ": " + dir.error);
    s.out_fd_ = std::move(dir.value);

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
        const int err = errno;
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

Result<std::string> StagingDir::claim_output(const std::string& stem, const std::string& ext) {
    for (int n = 1; n <= 16; ++n) {
        const std::string candidate = n == 1 ? stem : stem + "-" + std::to_string(n);
        std::vector<Claim> got;
        for (const std::string& name : {candidate + ext, candidate + ext + ".sha256"}) {
            Fd fd(::openat(out_fd_.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
            struct stat st {};
            if (!fd.valid() || ::fstat(fd.get(), &st) != 0) {
                const int err = errno;
                for (const auto& c : got) ::unlinkat(out_fd_.get(), c.name.c_str(), 0);
                if (err != EEXIST)
                    return Status::failure("cannot create " + out_dir_ + "/" + name + ": " + errno_text(err));
                got.clear();
                break;
            }
            got.push_back({name, st.st_dev, st.st_ino});
        }
        if (got.size() == 2) {
            claims_.insert(claims_.end(), got.begin(), got.end());
            return candidate;
        }
    }
    return Status::failure("cannot name the bundle in " + out_dir_ + ": " + stem + ext + " and its 15 alternatives (" +
                           stem + "-2" + ext +
                           " ...) are taken by files or directories put there; remove them or "
                           "give another output directory");
}

void StagingDir::remove() {
    // Claims never published: ours still (not what the archive or someone else put there).
    for (const auto& c : claims_) {
        struct stat there {};
        if (::fstatat(out_fd_.get(), c.name.c_str(), &there, AT_SYMLINK_NOFOLLOW) == 0 && there.st_dev == c.dev &&
            there.st_ino == c.ino)
            ::unlinkat(out_fd_.get(), c.name.c_str(), 0);
    }
    claims_.clear();
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
