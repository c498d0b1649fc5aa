#include "captured.hpp"

#include <fcntl.h>
#include <unistd.h>

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
    const int file = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(file, fd);
    ::close(file);
    fn();
    std::fflush(nullptr);
    ::dup2(saved, fd);
    ::close(saved);
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace jobtrail::test
