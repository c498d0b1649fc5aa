#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "temp_dir.hpp"

namespace jobtrail::test {

// Runs tests/loki_double/loki_double.py on a free loopback port for one test.
class LokiDouble {
public:
    explicit LokiDouble(std::vector<std::string> args = {});
    ~LokiDouble();
    LokiDouble(const LokiDouble&) = delete;
    LokiDouble& operator=(const LokiDouble&) = delete;

    const std::string& url() const { return url_; }

private:
    TempDir dir_{"loki"};
    std::string url_;
    pid_t pid_ = -1;
};

}  // namespace jobtrail::test
