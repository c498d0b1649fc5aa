#include "unix_socket.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace jobtrail::test {

std::string unix_socket_at(const std::string& path, uid_t owner) {
    const int s = socket(AF_UNIX, SOCK_STREAM, 0);
    REQUIRE(s >= 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    path.copy(a.sun_path, sizeof a.sun_path - 1);
    const bool bound = bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    close(s);
    REQUIRE(bound);
    REQUIRE(chown(path.c_str(), owner, owner) == 0);
    return path;
}

}  // namespace jobtrail::test
