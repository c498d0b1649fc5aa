#pragma once

#include <sys/types.h>

#include <string>

namespace jobtrail::test {

// Mounts the kmsgfs fixture (tests/fixtures/kmsgfs) in a fresh temporary directory for one
// test and unmounts it afterwards.
class KmsgfsMount {
public:
    explicit KmsgfsMount(size_t ring_bytes = 1 << 20);
    ~KmsgfsMount();
    KmsgfsMount(const KmsgfsMount&) = delete;
    KmsgfsMount& operator=(const KmsgfsMount&) = delete;

    std::string kmsg() const { return dir_ + "/mnt/kmsg"; }
    // Writes commands to ctl ("PRIO;TEXT" lines, "!drop N").
    void ctl(const std::string& commands) const;
    const std::string& dir() const { return dir_; }

private:
    std::string dir_;
    pid_t pid_ = -1;
};

// A scratch directory removed at the end of the test.
class TempDir {
public:
    TempDir();
    ~TempDir();
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

}  // namespace jobtrail::test
