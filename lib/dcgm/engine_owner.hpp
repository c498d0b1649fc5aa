#pragma once

#include <string>

// Who holds the host engine's address. nv-hostengine runs as root; while it is down (not
// installed, restarting) any local user may listen on 127.0.0.1:5555, an unprivileged port, or
// leave a socket at its unix path, and feed the root shipper forged violations naming another
// job's GPU. So before each connect: a local listener that is not root's is refused.
namespace jobtrail::dcgm {

// Why `address` (ClientOptions' form: "" for 127.0.0.1:5555, "host:port", or a unix socket path
// when unix_socket) must not be trusted; empty when it may. Nobody holding it is fine (the
// connect then fails by itself), as is a host that is not this one (the operator's choice).
// `proc_net` is where tcp and tcp6 are read (/proc/net; tests give their own).
std::string untrusted_holder(const std::string& address, bool unix_socket, const std::string& proc_net = "/proc/net");

}  // namespace jobtrail::dcgm
