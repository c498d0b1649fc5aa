#pragma once

#include <sys/types.h>

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/fs.hpp"
#include "common/result.hpp"

// Where `jobtrail bundle` puts a bundle together, and how its output lands. The output directory
// may be one that others can write (an operator's /tmp, a user's directory): whatever they plant
// or rename there is never written or read through. The bundle is made in a directory of its own,
// created fresh and used only through descriptors.
namespace jobtrail::forensics {

// A new file of a directory, written under a fresh temporary name (create_temp_at) and renamed
// onto its own name by publish(): a link planted at that name is replaced, never written
// through, and nobody sees half a file. Removed if never published.
class OutputFile {
public:
    OutputFile() = default;
    OutputFile(OutputFile&& o) noexcept = default;
    OutputFile& operator=(OutputFile&& o) = delete;
    ~OutputFile();

    // In the directory open as dirfd (`dir` names it in messages), with exactly `mode`; the
    // descriptor reads and writes.
    static Result<OutputFile> create(int dirfd, const std::string& dir, const std::string& name, mode_t mode);
    int fd() const { return fd_.get(); }
    Status publish();

private:
    void discard();
    Fd dir_fd_, fd_;
    std::string dir_, name_, tmp_;
};

// The staging directory: <out_dir>/<prefix>-<random>.partial, mode 0700, made with mkdirat
// relative to out_dir's descriptor and never one that was already there. Everything in it is
// reached relative to descriptors of directories we made, without following links; it is
// removed, the same way, when the object goes (every way out of a bundle, exceptions included).
class StagingDir {
public:
    StagingDir() = default;
    StagingDir(StagingDir&& o) noexcept = default;
    StagingDir& operator=(StagingDir&& o) = delete;
    ~StagingDir();

    // Opens out_dir (made, as by mkdir -p, if it is missing) and creates the directory in it.
    // The path is walked a component at a time without following links, save those of root or
    // of ourselves: a link someone else planted on the way (/tmp/x -> /etc) is refused, and so
    // is an output directory another user owns or that anyone may write without the sticky bit
    // (they could swap what we publish there).
    static Result<StagingDir> create(const std::string& out_dir, const std::string& prefix);

    // Claims the output's name: <stem><ext> and <stem><ext>.sha256 are created empty (O_EXCL,
    // no link followed), so that publish() replaces only our own files. A name already taken
    // (a directory, file or link someone put there) is left alone and the next is tried,
    // <stem>-2<ext>, -3, ... up to -16. Returns the stem claimed. Claims not published are
    // removed with the staging directory.
    Result<std::string> claim_output(const std::string& stem, const std::string& ext);

    // A file below the staging directory by relative path ("nodes/n1/kmsg.log", components
    // checked by the caller): created new (O_EXCL, 0600, its directories made as needed), or one
    // created before, opened with `flags` (O_RDONLY, O_WRONLY | O_APPEND, O_RDWR).
    Result<Fd> create_file(const std::string& rel);
    Result<Fd> open_file(const std::string& rel, int flags) const;
    Status write_file(const std::string& rel, std::string_view content);

    // A file of the output directory (OutputFile).
    Result<OutputFile> create_output(const std::string& name, mode_t mode) const;

    const std::string& path() const { return path_; }  // for messages only: never opened
    const std::string& out_dir() const { return out_dir_; }

private:
    Result<Fd> parent_of(const std::string& rel, bool make, std::string& leaf) const;
    void remove();

    std::string out_dir_, name_, path_;
    Fd out_fd_, fd_;
    struct Claim {
        std::string name;
        dev_t dev;
        ino_t ino;
    };
    std::vector<Claim> claims_;
};

// A buffered stream over a descriptor (fdopen), closed with it. A writer that must know its
// data is out calls fflush() and checks it before the stream goes.
struct FileCloser {
    void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;
Result<File> open_stream(Fd fd, const char* mode, const std::string& what);

// Reads a stream line by line, without the '\n'; the last line may lack one.
class LineReader {
public:
    explicit LineReader(FILE* f) : f_(f) {}
    LineReader(const LineReader&) = delete;
    LineReader& operator=(const LineReader&) = delete;
    ~LineReader();
    bool next(std::string& line);

private:
    FILE* f_;
    char* buf_ = nullptr;
    size_t cap_ = 0;
};

}  // namespace jobtrail::forensics
