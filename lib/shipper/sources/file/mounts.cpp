#include "shipper/sources/file/mounts.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <sstream>

namespace jobtrail::shipper {
namespace {

// mountinfo writes a space, tab, newline or backslash in a path as \ and three octal digits.
std::string unescape(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        auto octal = [&](size_t j) { return j < s.size() && s[j] >= '0' && s[j] <= '7'; };
        if (s[i] == '\\' && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
            out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
            i += 3;
        } else {
            out += s[i];
        }
    }
    return out;
}

}  // namespace

MountPoints::MountPoints(std::string mountinfo)
    : file_(std::move(mountinfo)), fd_(::open(file_.c_str(), O_RDONLY | O_CLOEXEC)) {}

void MountPoints::refresh() {
    if (!fd_.valid()) return;  // no /proc: the st_dev check of each directory still holds
    if (read_) {
        struct pollfd p {
            fd_.get(), POLLPRI, 0
        };
        if (::poll(&p, 1, 0) <= 0 || !(p.revents & (POLLPRI | POLLERR))) return;
    }
    // Read from the start on the same descriptor: that is what clears the change it reported.
    std::string text;
    char buf[65536];
    ssize_t n;
    for (off_t at = 0; (n = ::pread(fd_.get(), buf, sizeof buf, at)) > 0; at += n)
        text.append(buf, static_cast<size_t>(n));
    read_ = true;
    points_.clear();
    std::istringstream in(text);
    std::string line;
    // "<id> <parent> <major:minor> <root> <mount point> ..."
    while (std::getline(in, line)) {
        std::istringstream f(line);
        std::string id, parent, dev, root, point;
        if (f >> id >> parent >> dev >> root >> point) points_.insert(unescape(point));
    }
}

void MountPoints::root(const std::string& configured) {
    if (roots_.count(configured)) return;
    char real[PATH_MAX];
    if (::realpath(configured.c_str(), real) != nullptr && configured != real) roots_[configured] = real;
}

bool MountPoints::contains(const std::string& path) const {
    for (const auto& [configured, real] : roots_)
        if (path.rfind(configured, 0) == 0 && (path.size() == configured.size() || path[configured.size()] == '/'))
            return points_.count(real + path.substr(configured.size())) != 0;
    return points_.count(path) != 0;
}

}  // namespace jobtrail::shipper
