#pragma once

#include "common/fs.hpp"
#include "common/result.hpp"

namespace jobtrail::shipper {

// systemd socket activation, sd_listen_fds(3) semantics by hand (libsystemd is no dependency):
// when LISTEN_PID names this process, LISTEN_FDS sockets start at fd 3. systemd binds them at
// boot (etc/systemd/jobtrail-shipper.socket), before any user could take the port. The
// variables are unset, so nothing the shipper starts takes them for its own.
// Returns the first socket (an invalid Fd when none was passed), made close-on-exec and
// non-blocking; any further ones are closed. Fails, naming the fd, if it is not a listening
// stream socket. Call before starting threads (it changes the environment).
Result<Fd> take_listen_socket();

}  // namespace jobtrail::shipper
