#include "shipper/sources/file/watch.hpp"

#include <sys/inotify.h>
#include <unistd.h>

namespace jobtrail::shipper {

DirWatch::DirWatch() : inotify_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {}

void DirWatch::update(const std::set<std::string>& dirs) {
    if (!inotify_.valid()) return;
    for (auto it = watched_.begin(); it != watched_.end();) {
        if (dirs.count(it->first)) {
            ++it;
            continue;
        }
        ::inotify_rm_watch(inotify_.get(), it->second);
        it = watched_.erase(it);
    }
    for (const auto& d : dirs) {
        if (watched_.count(d)) continue;
        // A user's directory: never followed through a link; failing (the watch limit) only
        // means its lines wait for the poll interval, as without a watch.
        const int wd = ::inotify_add_watch(inotify_.get(), d.c_str(), IN_MODIFY | IN_ONLYDIR | IN_DONT_FOLLOW);
        if (wd >= 0) watched_[d] = wd;
    }
}

void DirWatch::drain() {
    // A few reads, not until empty: writers on many cores could keep it from ever being empty.
    // What is left keeps the descriptor readable for the next wait.
    alignas(struct inotify_event) char buf[4096];
    for (int i = 0; i < 4 && inotify_.valid() && ::read(inotify_.get(), buf, sizeof buf) > 0; ++i) {
    }
}

}  // namespace jobtrail::shipper
