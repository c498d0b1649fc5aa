#pragma once

#include <set>
#include <string>

#include "common/fs.hpp"

namespace jobtrail::shipper {

// The mount points of this mount namespace (/proc/self/mountinfo), read again only when the
// kernel says the table changed. A file source never opens or stats a directory that is one:
// a user's FUSE mount on their own job directory answers root with EACCES, or, if its daemon
// never answers, leaves the caller blocked in the kernel for good.
class MountPoints {
public:
    explicit MountPoints(std::string mountinfo = "/proc/self/mountinfo");
    void refresh();
    bool contains(const std::string& path) const { return points_.count(path) != 0; }

private:
    std::string file_;
    Fd fd_;  // kept open: poll() says POLLPRI when a mount came or went
    bool read_ = false;
    std::set<std::string> points_;
};

}  // namespace jobtrail::shipper
