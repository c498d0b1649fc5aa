#!/usr/bin/python3
"""The shipper's /metrics port against a hostile local user: connections held open do not make a
scrape wait, and a port someone else holds stops the shipper (naming the address) instead of
letting them answer scrapes in its name.
Needs JOBTRAIL_BUILD (the build directory) and root (kmsg fixture)."""
import os, socket, subprocess, sys, unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
import skips  # noqa: E402
from jtsupport import SHIPPER, Env, free_port, http, scrape  # noqa: E402


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

    def test_a_port_someone_else_holds_stops_the_shipper_naming_the_address(self):
        squatter = socket.socket()
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        address = "127.0.0.1:%d" % squatter.getsockname()[1]
        env = Env(metrics=address)
        try:
            try:
                r = subprocess.run([SHIPPER, "--config", env.dir + "/cfg.yaml"], capture_output=True, timeout=30)
            except subprocess.TimeoutExpired:
                self.fail("the shipper ran on with another process answering on " + address)
            err = r.stderr.decode()
            self.assertNotEqual(r.returncode, 0, err)
            self.assertIn("cannot listen on " + address + ": Address already in use", err)
            # Nothing was read or spooled before it stopped.
            self.assertFalse(os.path.exists(env.dir + "/state/spool"), err)
        finally:
            squatter.close()
            env.close()


if __name__ == "__main__":
    skips.main()
