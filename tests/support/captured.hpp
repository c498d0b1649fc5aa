#pragma once

#include <functional>
#include <string>

namespace jobtrail::test {

// What `fn` wrote to file descriptor `fd` (stderr, stdout): what a daemon's journal or slurmd's
// log would get from it, C++ streams, stdio and libraries' own writes alike.
std::string captured(int fd, const std::function<void()>& fn);

}  // namespace jobtrail::test
