#include "dcgm/engine_owner.hpp"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

namespace jobtrail::dcgm {
namespace {

constexpr unsigned kDefaultPort = 5555;  // nv-hostengine's default TCP port

// The uid of a listener on a local address at `port` in /proc/net/tcp or tcp6, or -1.
long long local_listener_uid(const std::string& proc_net, unsigned port) {
    for (const char* table : {"tcp", "tcp6"}) {
        std::ifstream in(proc_net + "/" + table);
        std::string line;
        std::getline(in, line);  // the header
        while (std::getline(in, line)) {
            std::istringstream f(line);
            std::string slot, local, remote, state, queues, timer, retransmits;
            long long uid = -1;
            if (!(f >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid)) continue;
            const auto colon = local.rfind(':');
            if (state != "0A" || colon == std::string::npos) continue;  // 0A: LISTEN
            if (std::stoul(local.substr(colon + 1), nullptr, 16) != port) continue;
            return uid;  // a port has one listening owner (SO_REUSEPORT needs the same uid)
        }
    }
    return -1;
}

bool loopback(const std::string& host) {
    return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1" || host == "[::1]";
}

}  // namespace

std::string untrusted_holder(const std::string& address, bool unix_socket, const std::string& proc_net) {
    if (unix_socket) {
        struct stat st {};
        if (lstat(address.c_str(), &st) != 0) return {};
        if (!S_ISSOCK(st.st_mode)) return address + " is not a socket";
        if (st.st_uid != 0) return address + " belongs to uid " + std::to_string(st.st_uid) + ", not root";
        const auto slash = address.rfind('/');
        const std::string dir = slash == std::string::npos || slash == 0 ? "/" : address.substr(0, slash);
        struct stat d {};
        if (stat(dir.c_str(), &d) != 0) return {};
        // A directory others may write to without the sticky bit: the socket can be swapped.
        if (d.st_uid != 0 || ((d.st_mode & (S_IWGRP | S_IWOTH)) && !(d.st_mode & S_ISVTX)))
            return dir + " can be written by users other than root";
        return {};
    }
    std::string host = address.empty() ? "127.0.0.1" : address;
    unsigned port = kDefaultPort;
    if (const auto colon = host.rfind(':'); colon != std::string::npos && host.find(':') == colon) {
        try {
            port = static_cast<unsigned>(std::stoul(host.substr(colon + 1)));
        } catch (const std::exception&) {
            return {};  // not a port: the connect says so
        }
        host.resize(colon);
    }
    if (!loopback(host)) return {};
    const long long uid = local_listener_uid(proc_net, port);
    if (uid > 0)
        return "port " + std::to_string(port) + " of this node is held by uid " + std::to_string(uid) +
               ", not root: not DCGM's host engine";
    return {};
}

}  // namespace jobtrail::dcgm
