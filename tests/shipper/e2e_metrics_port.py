#!/usr/bin/python3
"""The shipper's /metrics port against a hostile local user: connections held open do not make a
scrape wait; a port someone else holds does not stop shipping (the shipper says so on its own
stream and binds the port once it is free); a socket systemd passes is served.
Needs JOBTRAIL_BUILD (the build directory) and root (kmsg fixture)."""
import os, socket, subprocess, sys, time, unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
import skips  # noqa: E402
from jtsupport import SHIPPER, Env, free_port, http, scrape, wait_for_lines  # noqa: E402


def metrics_within_5s(port):
    """/metrics of the port, once it answers (within 5 s: a scraper's patience); "" if it never did."""
    for _ in range(50):
        try:
            return http("GET", "http://127.0.0.1:%d/metrics" % port, timeout=2)[1]
        except OSError:
            time.sleep(0.1)
    return ""


class MetricsPort(unittest.TestCase):
    def test_connections_held_open_do_not_hold_up_a_scrape(self):
        port = free_port()
        env = Env(metrics="127.0.0.1:%d" % port)
        idle = []
        try:
            env.start()
            scrape(port)  # it listens
            # A local user opens connections and sends nothing (one at a time, 2 s each, they
            # made a scrape wait 40 s), and one that sends half a request.
            idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(20)]
            idle[0].sendall(b"GET /metr")
            # 5 s: a scraper's patience, not a measured bound.
            status, body = http("GET", "http://127.0.0.1:%d/metrics" % port, timeout=5)
            self.assertEqual(status, 200)
            self.assertIn("\njobtrail_shipper_records_read_total ", body)
            # More connections than it holds: the oldest are closed, the scrape still answered.
            idle += [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(100)]
            status, body = http("GET", "http://127.0.0.1:%d/metrics" % port, timeout=5)
            self.assertEqual(status, 200)
            self.assertEqual(env.proc.poll(), None)
        finally:
            for s in idle:
                s.close()
            env.close()

    def test_a_port_someone_else_holds_does_not_stop_shipping(self):
        """A local user took the port first: the shipper ships all the same, says on its own
        stream who may answer scrapes in its name, and serves metrics once the port is free."""
        squatter = socket.socket()
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        address = "127.0.0.1:%d" % port
        env = Env(metrics=address)
        try:
            env.start()
            with open(env.dir + "/logs/a.log", "w") as f:
                f.write("shipped while the port is taken\n")
            wait_for_lines(env, "app", lambda ls: "shipped while the port is taken" in ls, tries=300)
            own = wait_for_lines(env, "jobtrail-shipper",
                                 lambda ls: any("cannot listen on " + address in l for l in ls), tries=300)
            said = [l for l in own if "cannot listen on " + address in l][0]
            self.assertIn("error", said)
            self.assertIn("scrapes", said)
            self.assertEqual(env.proc.poll(), None)
            squatter.close()
            # Tried again every 30 s.
            for _ in range(450):
                try:
                    status, body = http("GET", "http://127.0.0.1:%d/metrics" % port, timeout=2)
                    if status == 200:
                        break
                except OSError:
                    pass
                time.sleep(0.1)
            self.assertIn("\njobtrail_shipper_records_read_total ", body)
            wait_for_lines(env, "jobtrail-shipper", lambda ls: any("listening on " + address in l for l in ls),
                           tries=100)
        finally:
            squatter.close()
            env.close()


class SocketActivation(unittest.TestCase):
    def test_metrics_are_served_on_the_socket_systemd_passes(self):
        """systemd binds the port at boot (jobtrail-shipper.socket) and passes it as fd 3; the
        address in shipper.metrics is then not bound."""
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        configured = free_port()
        env = Env(metrics="127.0.0.1:%d" % configured)
        proc = None
        try:
            fd = sock.fileno()

            def as_systemd():  # in the child, before exec: fd 3, its pid (putenv reaches exec)
                os.dup2(fd, 3)
                os.environ["LISTEN_FDS"] = "1"
                os.environ["LISTEN_PID"] = str(os.getpid())

            proc = subprocess.Popen([SHIPPER, "--config", env.dir + "/cfg.yaml"], pass_fds=(fd, 3),
                                    preexec_fn=as_systemd, stderr=subprocess.DEVNULL)
            sock.close()  # the shipper holds it now
            # The socket queues connections from the start: a shipper that does not serve it
            # leaves them unanswered.
            body = metrics_within_5s(port)
            self.assertIn("\njobtrail_shipper_records_read_total ", body)
            with self.assertRaises(OSError):
                http("GET", "http://127.0.0.1:%d/metrics" % configured, timeout=2)
            self.assertEqual(proc.poll(), None)
        finally:
            sock.close()
            if proc:
                proc.kill()
                proc.wait()
            env.close()

    def test_a_passed_fd_that_is_no_listening_socket_is_said_and_the_configured_port_bound(self):
        """A unit file that passes the wrong fd (ListenDatagram=, a file): the shipper says so on its
        own stream, as an error, binds shipper.metrics instead and ships as ever."""
        configured = free_port()
        env = Env(metrics="127.0.0.1:%d" % configured)
        proc = None
        try:
            with open(env.dir + "/not-a-socket", "w") as f:
                fd = f.fileno()

                def as_systemd():
                    os.dup2(fd, 3)
                    os.environ["LISTEN_FDS"] = "1"
                    os.environ["LISTEN_PID"] = str(os.getpid())

                proc = subprocess.Popen([SHIPPER, "--config", env.dir + "/cfg.yaml"], pass_fds=(fd, 3),
                                        preexec_fn=as_systemd, stderr=subprocess.DEVNULL)
            with open(env.dir + "/logs/a.log", "w") as f:
                f.write("shipped with a wrong fd passed\n")
            wait_for_lines(env, "app", lambda ls: "shipped with a wrong fd passed" in ls, tries=300)
            own = wait_for_lines(env, "jobtrail-shipper",
                                 lambda ls: any("fd 3 from systemd is not a listening stream socket" in l
                                                for l in ls), tries=300)
            said = [l for l in own if "fd 3 from systemd" in l][0]
            self.assertIn("error", said)
            self.assertIn("binding shipper.metrics", said)
            body = metrics_within_5s(configured)
            self.assertIn("\njobtrail_shipper_records_read_total ", body)
            self.assertEqual(proc.poll(), None)
        finally:
            if proc:
                proc.kill()
                proc.wait()
            env.close()


if __name__ == "__main__":
    skips.main()
