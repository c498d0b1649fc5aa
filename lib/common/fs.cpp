#include "common/fs.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

namespace jobtrail {

Fd& Fd::operator=(Fd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
}

Fd::~Fd() {
    reset();
}

int Fd::release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
}

void Fd::reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
}

std::string errno_text(int err) {
    return std::strerror(err);
}

Status make_dirs(const std::string& path, mode_t mode) {
    if (path.empty()) return Status::failure("empty directory path");
    std::string cur;
    size_t pos = 0;
    while (pos <= path.size()) {
        size_t next = path.find('/', pos);
        if (next == std::string::npos) next = path.size();
        cur = path.substr(0, next);
        pos = next + 1;
        if (cur.empty()) continue;
        if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST)
            return Status::failure("cannot create directory " + cur + ": " + errno_text(errno));
    }
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0)
        return Status::failure("cannot stat directory " + path + ": " + errno_text(errno));
    if (S_ISLNK(st.st_mode)) {
        // A symlinked directory is only acceptable when root owns the link target chain; keep it
        // simple and accept it only if it resolves to a root-owned directory.
        struct stat target {};
        if (::stat(path.c_str(), &target) != 0 || !S_ISDIR(target.st_mode) || target.st_uid != 0)
            return Status::failure(path + " is a symlink to something that is not a root-owned directory");
        return {};
    }
    if (!S_ISDIR(st.st_mode)) return Status::failure(path + " exists and is not a directory");
    return {};
}

Result<Fd> open_append_safe(const std::string& dir, std::string_view name, mode_t mode) {
    Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dfd.valid()) return Status::failure("cannot open directory " + dir + ": " + errno_text(errno));
    const std::string n(name);
    Fd fd(::openat(dfd.get(), n.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode));
    if (!fd.valid()) return Status::failure("cannot open " + dir + "/" + n + ": " + errno_text(errno));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return Status::failure("cannot stat " + dir + "/" + n + ": " + errno_text(errno));
    if (!S_ISREG(st.st_mode)) return Status::failure(dir + "/" + n + " is not a regular file");
    if (st.st_nlink > 1) return Status::failure(dir + "/" + n + " has other hard links; refusing to write");
    // Clear O_NONBLOCK (only there so opening a FIFO planted by someone cannot hang us).
    const int fl = ::fcntl(fd.get(), F_GETFL);
    if (fl >= 0) ::fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

bool write_all(int fd, std::string_view data) {
    while (!data.empty()) {
        const ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
}

namespace {

// 64 bits from the kernel's generator: a name nobody can plant ahead of us (a pid and a counter,
// or a PRNG seeded once, can be guessed by whoever watches the directory).
uint64_t unguessable() {
    uint64_t r = 0;
    if (::getrandom(&r, sizeof r, 0) == static_cast<ssize_t>(sizeof r)) return r;
    static thread_local std::mt19937_64 rng{std::random_device{}()};  // getrandom refused (seccomp)
    return rng();
}

Status write_temp(const std::string& path, std::string_view content, mode_t mode, bool durable, std::string& tmp) {
    auto fd = create_temp_at(AT_FDCWD, path, mode, tmp);
    if (!fd.ok) return fd;
    if (!write_all(fd.value.get(), content)) {
        const int err = errno;
        ::unlink(tmp.c_str());
        return Status::failure("cannot write " + tmp + ": " + errno_text(err));
    }
    if (durable && ::fsync(fd.value.get()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        return Status::failure("cannot fsync " + tmp + ": " + errno_text(err));
    }
    return {};
}

}  // namespace

std::string temp_name(std::string_view name) {
    char suffix[48];
    std::snprintf(suffix, sizeof suffix, ".tmp.%d.%016llx", static_cast<int>(::getpid()),
                  static_cast<unsigned long long>(unguessable()));
    return std::string(name) + suffix;
}

Result<Fd> create_temp_at(int dirfd, const std::string& name, mode_t mode, std::string& tmp) {
    // A name someone made first (they can list the directory) is passed over, never opened.
    for (int attempt = 0; attempt < 16; ++attempt) {
        tmp = temp_name(name);
        Fd fd(::openat(dirfd, tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
        if (fd.valid()) {
            ::fchmod(fd.get(), mode);  // umask must not widen or narrow what we promise
            return fd;
        }
        if (errno != EEXIST) break;
    }
    return Status::failure("cannot create " + tmp + ": " + errno_text(errno));
}

Status write_file_atomic(const std::string& path, std::string_view content, mode_t mode, bool durable) {
    std::string tmp;
    if (auto st = write_temp(path, content, mode, durable, tmp); !st.ok) return st;
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        return Status::failure("cannot rename " + tmp + " to " + path + ": " + errno_text(err));
    }
    if (durable) {
        const size_t slash = path.rfind('/');
        Fd dir(::open(slash == std::string::npos ? "." : path.substr(0, slash).c_str(),
                      O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (dir.valid()) ::fsync(dir.get());
    }
    return {};
}

Status create_file_exclusive(const std::string& path, std::string_view content, mode_t mode, bool* created) {
    std::string tmp;
    if (auto st = write_temp(path, content, mode, false, tmp); !st.ok) return st;
    // link() fails with EEXIST instead of replacing, so concurrent writers agree on one file.
    const int rc = ::link(tmp.c_str(), path.c_str());
    const int err = errno;
    ::unlink(tmp.c_str());
    if (rc == 0) {
        if (created) *created = true;
        return {};
    }
    if (err == EEXIST) {
        if (created) *created = false;
        return {};
    }
    return Status::failure("cannot create " + path + ": " + errno_text(err));
}

const char* refusal_name(Refusal r) {
    switch (r) {
        case Refusal::kNone:
            return "none";
        case Refusal::kMissing:
            return "missing";
        case Refusal::kSymlink:
            return "symlink";
        case Refusal::kNotRegular:
            return "not_regular";
        case Refusal::kHardLinked:
            return "hard_link";
        case Refusal::kForeignOwner:
            return "owner";
        case Refusal::kUnreadable:
            return "unreadable";
        case Refusal::kTooMany:
            return "too_many_files";
        case Refusal::kOwnerShare:
            return "too_many_files_of_owner";
        case Refusal::kUnexpectedName:
            return "unexpected_name";
    }
    return "unknown";
}

SafeFile open_read_safe(const std::string& path) {
    SafeFile out;
    auto refuse = [&](Refusal r, std::string why) {
        out.fd.reset();
        out.refused = r;
        out.error = path + ": " + why;
        return std::move(out);
    };
    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    if (name.empty() || name == "." || name == "..") return refuse(Refusal::kNotRegular, "not a file name");
    // The directory's own last component is not followed either: a job's user may own its parent.
    Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dfd.valid()) {
        const int err = errno;
        if (err == ENOENT) return refuse(Refusal::kMissing, "directory is gone");
        return refuse(err == ELOOP || err == ENOTDIR ? Refusal::kSymlink : Refusal::kUnreadable,
                      "cannot open its directory: " + errno_text(err));
    }
    struct stat dst {};
    if (::fstat(dfd.get(), &dst) != 0)
        return refuse(Refusal::kUnreadable, "cannot stat its directory: " + errno_text(errno));
    out.fd.reset(::openat(dfd.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (!out.fd.valid()) {
        const int err = errno;
        if (err == ENOENT) return refuse(Refusal::kMissing, "gone");
        if (err == ELOOP) return refuse(Refusal::kSymlink, "is a symbolic link");
        return refuse(Refusal::kUnreadable, "cannot open: " + errno_text(err));
    }
    if (::fstat(out.fd.get(), &out.st) != 0) return refuse(Refusal::kUnreadable, "cannot stat: " + errno_text(errno));
    if (!S_ISREG(out.st.st_mode)) return refuse(Refusal::kNotRegular, "is not a regular file");
    if (out.st.st_nlink != 1) return refuse(Refusal::kHardLinked, "has other hard links");
    // Root's own files (slurmd's log in a slurm-owned /var/log/slurm) are fine; in a user's
    // directory only that user's files are, and a user cannot give a file to root.
    if (out.st.st_uid != dst.st_uid && out.st.st_uid != 0)
        return refuse(Refusal::kForeignOwner, "is owned by uid " + std::to_string(out.st.st_uid) +
                                                  ", not by its directory's owner (uid " + std::to_string(dst.st_uid) +
                                                  ")");
    return out;
}

std::optional<std::string> read_small_file(const std::string& path, size_t max_bytes) {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    if (!fd.valid()) return std::nullopt;
    std::string out;
    char buf[8192];
    while (out.size() < max_bytes) {
        const ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR) continue;
            return std::nullopt;
        }
        if (n == 0) break;
        out.append(buf, static_cast<size_t>(n));
    }
    if (out.size() > max_bytes) out.resize(max_bytes);
    return out;
}

Result<Fd> lock_exclusive(const std::string& path) {
    Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!fd.valid()) return Status::failure("cannot open " + path + ": " + errno_text(errno));
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        char buf[32] = {};
        const ssize_t n = ::pread(fd.get(), buf, sizeof buf - 1, 0);
        std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("?");
        while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
        if (err == EWOULDBLOCK) return Status::failure(path + " is held by another process (pid " + holder + ")");
        return Status::failure("cannot lock " + path + ": " + errno_text(err));
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    // The lock holds without the pid too; only a second process's message is poorer.
    const bool wrote = ::ftruncate(fd.get(), 0) == 0 &&
                       ::pwrite(fd.get(), pid.data(), pid.size(), 0) == static_cast<ssize_t>(pid.size());
    (void)wrote;
    return fd;
}

}  // namespace jobtrail
