#pragma once

#include <sys/types.h>

#include <string>

#include "temp_dir.hpp"

namespace jobtrail::test {

// Mounts the kmsgfs fixture (tests/fixtures/kmsgfs) in a fresh temporary directory for one
// test and unmounts it afterwards.
class KmsgfsMount {
public:
    explicit KmsgfsMount(size_t ring_bytes = 1 << 20);
    ~KmsgfsMount();
    KmsgfsMount(const KmsgfsMount&) = delete;
    KmsgfsMount& operator=(const KmsgfsMount&) = delete;

    std::string kmsg() const { return dir() + "/mnt/kmsg"; }
    // Writes commands to ctl ("PRIO;TEXT" lines, "!drop N").
    void ctl(const std::string& commands) const;
    const std::string& dir() const { return dir_.path(); }

private:
    TempDir dir_{"kmsgfs"};
    pid_t pid_ = -1;
};

}  // namespace jobtrail::test
