#!/usr/bin/python3
"""jobtrail-shipper under systemd: READY, WATCHDOG and STOPPING notifications, and one shipper
per state directory.
Needs JOBTRAIL_BUILD (the build directory) and root (kmsg fixture)."""
import os, signal, subprocess, sys, time, unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
import skips  # noqa: E402
from jtsupport import SHIPPER, Env  # noqa: E402


class ServiceManager(unittest.TestCase):
    def test_ready_after_recovery_and_watchdog_pings_while_the_loop_runs(self):
        """Type=notify: systemd hears READY=1 once the shipper is up, WATCHDOG=1 while its main loop
        makes progress (a stuck shipper is restarted), STOPPING=1 on SIGTERM."""
        import socket
        env = Env()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        path = env.dir + "/notify"
        sock.bind(path)
        sock.settimeout(0.2)
        try:
            proc = subprocess.Popen([SHIPPER, "--config", env.dir + "/cfg.yaml"], stderr=subprocess.DEVNULL,
                                    env=dict(os.environ, NOTIFY_SOCKET=path, WATCHDOG_USEC="400000"))
            got = []
            deadline = time.time() + 20
            while time.time() < deadline and sum("WATCHDOG=1" in m for m in got) < 3:
                try:
                    got.append(sock.recv(4096).decode())
                except socket.timeout:
                    pass
            proc.send_signal(signal.SIGTERM)
            end = time.time() + 20
            while time.time() < end and not any("STOPPING=1" in m for m in got):
                try:
                    got.append(sock.recv(4096).decode())
                except socket.timeout:
                    pass
            proc.wait(timeout=30)
            self.assertTrue(got and "READY=1" in got[0], got[:3])
            self.assertGreaterEqual(sum("WATCHDOG=1" in m for m in got), 3, got)
            self.assertTrue(any("STOPPING=1" in m for m in got), got[-3:])
        finally:
            sock.close()
            env.close()


    def test_a_second_shipper_on_the_same_state_directory_refuses_to_start(self):
        """Two shippers on one checkpoint and spool would each send every line: the second says who
        holds the state directory and exits; the first keeps running."""
        env = Env()
        try:
            first = subprocess.Popen([SHIPPER, "--config", env.dir + "/cfg.yaml"], stderr=subprocess.DEVNULL)
            lock = os.path.join(env.dir, "state", "shipper.lock")
            deadline = time.time() + 20
            while time.time() < deadline and not (os.path.exists(lock) and open(lock).read().strip()):
                time.sleep(0.05)
            second = subprocess.run([SHIPPER, "--config", env.dir + "/cfg.yaml"], capture_output=True, text=True,
                                    timeout=60)
            self.assertEqual(second.returncode, 1, second.stderr)
            self.assertIn("is held by another process (pid %d)" % first.pid, second.stderr)
            self.assertIsNone(first.poll())
            first.send_signal(signal.SIGTERM)
            first.wait(timeout=30)
        finally:
            env.close()


if __name__ == "__main__":
    skips.main()
