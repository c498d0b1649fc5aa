#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace jobtrail {

// An owned file descriptor.
class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    Fd(Fd&& o) noexcept : fd_(o.release()) {}
    Fd& operator=(Fd&& o) noexcept;
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd();

    int get() const { return fd_; }
    bool valid() const { return fd_ >= 0; }
    int release();
    void reset(int fd = -1);

private:
    int fd_ = -1;
};

// The helpers below fail with a Status (common/result.hpp) whose error names the path and errno.

// mkdir -p with the given mode for created components; refuses a symlink as the last
// component (a user could otherwise point root's writes elsewhere).
Status make_dirs(const std::string& path, mode_t mode);

// Opens dir/name for appending as a regular file, creating it with `mode`. Never follows a
// symlink, refuses hard-linked files and anything but a regular file.
// An exclusive lock on path (created 0644, flock), held while the Fd lives; our pid is written
// in it. Fails, naming the holder's pid, when another process holds it.
Result<Fd> lock_exclusive(const std::string& path);

Result<Fd> open_append_safe(const std::string& dir, std::string_view name, mode_t mode);

// "<name>.tmp.<pid>.<16 hex digits from getrandom>": a writer's temporary file beside `name`
// (readers of a directory skip ".tmp." names), which nobody can guess ahead of it.
std::string temp_name(std::string_view name);

// Creates a new file under a fresh temp_name(name) relative to dirfd (or AT_FDCWD), with
// exactly `mode`, open for reading and writing: O_CREAT|O_EXCL|O_NOFOLLOW, so a file or link
// planted there is never opened, and another name is tried. `tmp` gets the name, for the
// caller's renameat() or unlinkat().
Result<Fd> create_temp_at(int dirfd, const std::string& name, mode_t mode, std::string& tmp);

// Writes content to path via a temporary file in the same directory (create_temp_at) and
// rename(), so a reader sees either the old or the new content, and a link at path is replaced,
// never written through.
Status write_file_atomic(const std::string& path, std::string_view content, mode_t mode, bool durable = false);

// Like write_file_atomic but never replaces an existing file: the first writer wins.
// Returns ok with *created=false if the file was already there.
Status create_file_exclusive(const std::string& path, std::string_view content, mode_t mode, bool* created);

// Why open_read_safe refused a path: a metric label and a word in the log.
// kTooMany: past a source's or directory's cap; kOwnerShare: past one owner's share of a source.
enum class Refusal {
    kNone,
    kMissing,
    kSymlink,
    kNotRegular,
    kHardLinked,
    kForeignOwner,
    kUnreadable,
    kTooMany,
    kOwnerShare,
    kUnexpectedName  // not a name the source reads (a pod log path that is not kubelet's shape)
};
const char* refusal_name(Refusal r);

struct SafeFile {
    Fd fd;
    struct stat st {};
    Refusal refused = Refusal::kNone;
    std::string error;  // what was refused and why, naming the path
};

// Opens a file for reading that someone other than root may control (a job's NCCL directory):
// relative to its directory, opened without following a symlink in either, without blocking
// (a FIFO or device planted there cannot hang us), and kept only if it is a regular file with
// one link, owned by the directory's owner or by root. Anything else is refused, so root never
// reads a file through a name the file's owner did not give it.
SafeFile open_read_safe(const std::string& path);

std::optional<std::string> read_small_file(const std::string& path, size_t max_bytes = 1 << 20);

bool write_all(int fd, std::string_view data);

std::string errno_text(int err);

}  // namespace jobtrail
