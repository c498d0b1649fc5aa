#pragma once

#include <map>
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
    // A configured directory, known from now on by its real path (mountinfo's are canonical: a
    // site path through a link, /var/log/slurm -> /data/slurm, would match none). Resolved once,
    // when it first exists.
    void root(const std::string& configured);
    bool contains(const std::string& path) const;

private:
    std::string file_;
    std::map<std::string, std::string> roots_;  // configured -> real path
    Fd fd_;                                     // kept open: poll() says POLLPRI when a mount came or went
    bool read_ = false;
    std::set<std::string> points_;
};

}  // namespace jobtrail::shipper
