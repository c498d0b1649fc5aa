#pragma once

#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <csignal>

namespace jobtrail::test {

// While it lives, this process's files may grow to `bytes` only: write() stops part way, then
// fails with EFBIG, as on a full disk or past a quota (SIGXFSZ ignored meanwhile).
struct FileSizeLimit {
    rlimit old{};
    void (*old_handler)(int) = nullptr;
    explicit FileSizeLimit(rlim_t bytes) {
        ::getrlimit(RLIMIT_FSIZE, &old);
        const rlimit lim{bytes, old.rlim_max};
        REQUIRE(::setrlimit(RLIMIT_FSIZE, &lim) == 0);  // before the signal: a failure leaves both as they were
        old_handler = std::signal(SIGXFSZ, SIG_IGN);
    }
    ~FileSizeLimit() {
        ::setrlimit(RLIMIT_FSIZE, &old);
        std::signal(SIGXFSZ, old_handler);
    }
    FileSizeLimit(const FileSizeLimit&) = delete;
    FileSizeLimit& operator=(const FileSizeLimit&) = delete;
};

}  // namespace jobtrail::test
