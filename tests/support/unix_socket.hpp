#pragma once

#include <sys/types.h>

#include <string>

namespace jobtrail::test {

// A unix socket file bound at `path` (no listener behind it) and given to `owner`: what a local
// user could leave where a root daemon's socket is expected. Needs root for another owner.
std::string unix_socket_at(const std::string& path, uid_t owner);

}  // namespace jobtrail::test
