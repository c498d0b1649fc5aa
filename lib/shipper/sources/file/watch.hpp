#pragma once

#include <map>
#include <set>
#include <string>

#include "common/fs.hpp"

namespace jobtrail::shipper {

// Writes into the directories of tracked files wake the idle pipeline (inotify, at most one
// watch per directory, so bounded by the files tracked). Without it (no inotify, the watch
// limit) lines only wait for the poll interval.
class DirWatch {
public:
    DirWatch();
    // Watches exactly these directories from now on.
    void update(const std::set<std::string>& dirs);
    int fd() const { return inotify_.get(); }
    void drain();

private:
    Fd inotify_;
    std::map<std::string, int> watched_;  // directory -> watch
};

}  // namespace jobtrail::shipper
