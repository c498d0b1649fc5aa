#pragma once

#include <sys/mount.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace jobtrail::test {

// Detaches the mounts a test made, however it ends (before its TempDir is removed: declare
// this after it).
struct Unmount {
    std::vector<std::string> at;
    Unmount(std::initializer_list<std::string> points) : at(points) {}
    ~Unmount() {
        for (const auto& p : at) ::umount2(p.c_str(), MNT_DETACH);
    }
    Unmount(const Unmount&) = delete;
    Unmount& operator=(const Unmount&) = delete;
};

}  // namespace jobtrail::test
