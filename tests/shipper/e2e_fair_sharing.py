#!/usr/bin/python3
"""jobtrail-shipper under one job's NCCL flood: the node's own records are not held behind it,
and what its budget drops is said in its stream.
Needs JOBTRAIL_BUILD (the build directory) and root (kmsg fixture)."""
import os, re, sys, time, unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
import skips  # noqa: E402
from jtsupport import Env, free_port, scrape  # noqa: E402


class FairSharing(unittest.TestCase):
    """One job's NCCL output, however fast and however slowly Loki takes it, never delays the
    node's own records, and what its budget drops is said in its stream (hostile-users issue,
    point 6)."""

    FMT = "n1:100:100 [0] NCCL INFO flood line %07d " + "f" * 60 + "\n"

    def env_with_nccl(self, loki_args, stages):
        self.port = free_port()
        env = Env(loki_args=loki_args, metrics="127.0.0.1:%d" % self.port,
                  shipper_yaml="  spool: {max_size: 64MiB}\n  stages: %s" % stages)
        d = env.dir
        os.makedirs(d + "/nccl/4242")
        env.set_sources('{name: fm, paths: ["%(d)s/logs/fm.log"], job: fabric-manager, stream: fabric-manager}',
                        '{name: nccl, paths: ["%(d)s/nccl/*/*.log"], job: nccl, format: nccl}')
        open(d + "/logs/fm.log", "w").close()
        return env

    def flood(self, env, seconds):
        """Starts writing 200k NCCL lines/s (14 MB/s), 20k every 0.1 s; returns the thread."""
        import threading
        self.written = 0

        def run():
            with open(env.dir + "/nccl/4242/0.n1.100.log", "a") as f:
                t0 = time.time()
                for k in range(int(seconds * 10)):
                    f.write("".join(map(self.FMT.__mod__, range(self.written, self.written + 20000))))
                    f.flush()
                    self.written += 20000
                    time.sleep(max(0, t0 + (k + 1) * 0.1 - time.time()))
                self.flood_s = time.time() - t0

        t = threading.Thread(target=run)
        t.start()
        return t

    def test_an_nccl_flood_against_the_per_stream_limit_does_not_hold_the_kernel_or_the_fabric_manager(self):
        # No budget: the lanes alone keep the node's records moving past a job Loki holds back.
        env = self.env_with_nccl(["--per-stream-rate-kb", "128", "--per-stream-burst-kb", "128"],
                                 "{nccl_budget: {bytes: 0}}")
        try:
            env.start()
            t = self.flood(env, 6)
            try:
                time.sleep(4)  # megabytes of NCCL wait against the 128 KB/s stream limit by now
                # (The whole spool's: a shipper without lanes has its backlog there.)
                backlog = scrape(self.port)["jobtrail_shipper_spool_bytes"]
                env.kmsg(["NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."])
                with open(env.dir + "/logs/fm.log", "a") as f:
                    f.write("[Dec 01 2026 12:00:00] [ERROR] [tid 1] NVSwitch fatal error on port 3\n")
                t0 = time.time()
                kernel_at = fm_at = None
                while time.time() - t0 < 30 and (kernel_at is None or fm_at is None):
                    if kernel_at is None and any("Xid" in l for l in env.store_lines("kmsg")):
                        kernel_at = time.time() - t0
                    if fm_at is None and any("NVSwitch fatal" in l for l in env.store_lines("fabric-manager")):
                        fm_at = time.time() - t0
                    time.sleep(0.1)
            finally:
                t.join()
            m = scrape(self.port)
            print("lanes: %d NCCL lines written in %.1f s; %d bytes waiting in the spool when the kernel record "
                  "was written; kernel record in Loki after %s s, fabric manager line after %s s; kmsg lost %d"
                  % (self.written, self.flood_s, backlog, kernel_at, fm_at, m["jobtrail_shipper_kmsg_lost_total"]))
            self.assertGreater(backlog, 1 << 20, "the NCCL stream was not held back: nothing under test")
            self.assertIsNotNone(kernel_at, "the kernel record never arrived")
            self.assertIsNotNone(fm_at, "the fabric-manager line never arrived")
            self.assertLess(kernel_at, 5)
            self.assertLess(fm_at, 5)
            self.assertEqual(m["jobtrail_shipper_kmsg_lost_total"], 0)
            # The job's lines that made it so far are its first ones, in order, once: it waits, it
            # does not lose (the rest drains at Loki's pace).
            stored = env.store_lines("nccl")
            self.assertGreater(len(stored), 0)
            self.assertEqual(stored, [self.FMT[:-1] % i for i in range(len(stored))])
        finally:
            env.close()

    def test_a_job_over_its_nccl_budget_loses_only_the_excess_and_its_stream_says_how_many(self):
        env = self.env_with_nccl([], "{nccl_budget: {bytes: 2MiB, window: 2s}}")
        try:
            env.start()
            started = time.time()
            self.flood(env, 4).join()
            # Every NCCL line is in Loki or counted by its job's "dropped" line: none silently gone.
            said = re.compile(r"^jobtrail dropped (\d+) NCCL lines \(\d+ bytes\) of job 4242 over its budget "
                              r"of 2MiB per 2s on this node")
            deadline = time.time() + 120
            while True:
                lines = env.store_lines("nccl")
                stored = [l for l in lines if "flood line" in l]
                marks = [int(said.match(l).group(1)) for l in lines if said.match(l)]
                if len(stored) + sum(marks) >= self.written or time.time() > deadline:
                    break
                time.sleep(0.2)
            m = scrape(self.port)
            print("budget: %d NCCL lines written in %.1f s, %d stored, %d said dropped in %d lines, metrics %d"
                  % (self.written, self.flood_s, len(stored), sum(marks), len(marks),
                     m.get('jobtrail_shipper_dropped_total{reason="nccl_budget"}', 0)))
            self.assertEqual(len(stored), len(set(stored)))
            self.assertEqual(len(stored) + sum(marks), self.written)
            self.assertGreater(sum(marks), 0)
            self.assertEqual(m['jobtrail_shipper_dropped_total{reason="nccl_budget"}'], sum(marks))
            # At most the budget per window got through: 2 MiB per 2 s while the shipper read the
            # flood (on a loaded machine it reads for longer than the flood was written).
            windows = int((time.time() - started) / 2) + 2
            self.assertLessEqual(sum(len(l) for l in stored), windows * (2 << 20))
        finally:
            env.close()


if __name__ == "__main__":
    skips.main()
