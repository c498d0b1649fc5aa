#include "loki_double.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <thread>

namespace jobtrail::test {

LokiDouble::LokiDouble(std::vector<std::string> args) {
    const std::string port_file = dir_.path() + "/port";
    std::vector<std::string> argv = {"/usr/bin/python3", JOBTRAIL_SOURCE_DIR "/tests/loki_double/loki_double.py",
                                     "--port-file", port_file};
    argv.insert(argv.end(), args.begin(), args.end());
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
        // Gone with the test process, also when a timeout kills it (a mutation run's): a double
        // left behind holds the runner's output pipe open and a port.
        if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || ::getppid() != parent) ::_exit(127);
        std::vector<char*> cargv;
        for (auto& a : argv) cargv.push_back(a.data());
        cargv.push_back(nullptr);
        ::execv(cargv[0], cargv.data());
        ::_exit(127);
    }
    for (int i = 0; i < 3000; ++i) {  // up to 30 s: python's start on a loaded 2-core machine
        std::ifstream in(port_file);
        std::string port;
        if (in >> port) {
            url_ = "http://127.0.0.1:" + port;
            return;
        }
        if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
            pid_ = -1;
            FAIL("the Loki test double exited as it started");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // FAIL skips the destructor: the double goes first.
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    FAIL("the Loki test double did not start within 30 s");
}

LokiDouble::~LokiDouble() {
    if (pid_ > 0) {
        ::kill(pid_, SIGTERM);
        ::waitpid(pid_, nullptr, 0);
    }
}

}  // namespace jobtrail::test
