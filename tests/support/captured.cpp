#include "captured.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "temp_dir.hpp"

namespace jobtrail::test {

std::string captured(int fd, const std::function<void()>& fn) {
    TempDir dir;
    const std::string path = dir.path() + "/out";
    std::fflush(nullptr);
    const int saved = ::dup(fd);
    REQUIRE(saved >= 0);
    const int file = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(file >= 0);
    ::dup2(file, fd);
    ::close(file);
    {
        // Put back however fn ends (a failed REQUIRE throws): later reports, the sanitizers'
        // and Catch2's own, must reach the real stream.
        struct Restore {
            int fd, saved;
            ~Restore() {
                std::fflush(nullptr);
                ::dup2(saved, fd);
                ::close(saved);
            }
        } restore{fd, saved};
        fn();
    }
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace jobtrail::test
