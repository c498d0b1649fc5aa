#include "dcgm/engine_owner.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "skip.hpp"
#include "unix_socket.hpp"

using jobtrail::dcgm::untrusted_holder;
using jobtrail::test::unix_socket_at;

namespace {

// A TCP listener on 127.0.0.1 (port chosen by the kernel) held by `uid`, in a child process;
// returns its port and pid (kill it when done).
std::pair<unsigned, pid_t> listener_as(uid_t uid) {
    int pipefd[2];
    REQUIRE(pipe(pipefd) == 0);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        if (uid != 0 && setuid(uid) != 0) _exit(1);
        const int s = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(s, 1) != 0 ||
            getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0)
            _exit(1);
        const unsigned port = ntohs(a.sin_port);
        if (write(pipefd[1], &port, sizeof port) != sizeof port) _exit(1);
        pause();
        _exit(0);
    }
    close(pipefd[1]);
    unsigned port = 0;
    REQUIRE(read(pipefd[0], &port, sizeof port) == sizeof port);
    close(pipefd[0]);
    return {port, pid};
}

void stop(pid_t pid) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
}

}  // namespace

TEST_CASE("a local user listening on the host engine's port is not taken for DCGM", "[dcgm-client]") {
    if (geteuid() != 0) JOBTRAIL_SKIP("needs root to listen as another user");
    const auto [user_port, user] = listener_as(65534);
    const auto [root_port, root] = listener_as(0);
    const std::string refused = untrusted_holder("127.0.0.1:" + std::to_string(user_port), false);
    CHECK(refused.find("held by uid 65534, not root") != std::string::npos);
    CHECK(untrusted_holder("localhost:" + std::to_string(user_port), false) == refused);
    CHECK(untrusted_holder("127.0.0.1:" + std::to_string(root_port), false).empty());
    stop(user);
    stop(root);
    // Nobody there: the connect fails by itself. Another host: the operator's choice.
    CHECK(untrusted_holder("127.0.0.1:" + std::to_string(user_port), false).empty());
    CHECK(untrusted_holder("10.0.0.7:" + std::to_string(user_port), false).empty());
}

TEST_CASE("the default address is checked on port 5555, from the tables given", "[dcgm-client]") {
    const auto dir = std::filesystem::temp_directory_path() / ("jobtrail-net-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    const std::string header =
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
    auto write = [&](const char* table, const std::string& rows) {
        FILE* f = fopen((dir / table).c_str(), "w");
        fputs((header + rows).c_str(), f);
        fclose(f);
    };
    // 0x15B3 = 5555: listening (0A) as uid 1000; a connection (01) of uid 1001 to it does not count.
    write("tcp",
          "   0: 0100007F:15B3 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1\n"
          "   1: 0100007F:D431 0100007F:15B3 01 00000000:00000000 00:00000000 00000000  1001        0 2 1\n");
    write("tcp6", "");
    CHECK(untrusted_holder("", false, dir).find("port 5555 of this node is held by uid 1000") != std::string::npos);
    write("tcp", "");
    write("tcp6",
          "   0: 00000000000000000000000000000000:15B3 00000000000000000000000000000000:0000 0A "
          "00000000:00000000 00:00000000 00000000     0        0 3 1\n");
    CHECK(untrusted_holder("", false, dir).empty());
    // A user's outgoing connection bound to local port 5555 (01: established) is not a listener:
    // root's host engine listening on it is still taken.
    write("tcp",
          "   0: 0100007F:15B3 0A00000A:0050 01 00000000:00000000 00:00000000 00000000  1001        0 4 1\n"
          "   1: 00000000:15B3 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5 1\n");
    write("tcp6", "");
    CHECK(untrusted_holder("", false, dir).empty());
    std::filesystem::remove_all(dir);
}

TEST_CASE("a host engine socket a user made, or can swap, is not taken for DCGM", "[dcgm-client]") {
    if (geteuid() != 0) JOBTRAIL_SKIP("needs root to chown");
    const auto dir = std::filesystem::temp_directory_path() / ("jobtrail-sock-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    chmod(dir.c_str(), 0755);
    const std::string users = unix_socket_at((dir / "user.sock").string(), 65534);
    CHECK(untrusted_holder(users, true).find("belongs to uid 65534, not root") != std::string::npos);
    const std::string roots = unix_socket_at((dir / "root.sock").string(), 0);
    CHECK(untrusted_holder(roots, true).empty());
    chmod(dir.c_str(), 0777);  // anyone may rename root's socket away and put theirs there
    CHECK(untrusted_holder(roots, true).find("can be written by users other than root") != std::string::npos);
    chmod(dir.c_str(), 01777);  // /tmp's sticky bit: only root may
    CHECK(untrusted_holder(roots, true).empty());
    CHECK(untrusted_holder((dir / "none.sock").string(), true).empty());
    std::filesystem::remove_all(dir);
}
