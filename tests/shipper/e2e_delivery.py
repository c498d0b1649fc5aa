#!/usr/bin/python3
"""Delivery edges a user checks in Loki: identical NCCL lines of one microsecond each kept, also
across a restart in the middle of them; the shipper's own warnings not held back after an outage;
`--once` shipping a last line without newline.
Needs JOBTRAIL_BUILD (the build directory) and root (kmsg fixture)."""
import json, os, sys, time, unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
import skips  # noqa: E402
from jtsupport import Env, http  # noqa: E402


def entries(env, job):
    """[(ts, line)] of every stream of job in the double."""
    doc = json.loads(http("GET", env.url + "/-/store")[1])
    return [(int(e[0]), e[1]) for s in doc if s["labels"].get("job") == job for e in s["entries"]]


class NcclStamps(unittest.TestCase):
    def test_eight_identical_nccl_lines_of_one_microsecond_are_eight_entries_across_restarts(self):
        """NCCL stamps its lines to the microsecond; threads print the same line in one. Loki
        keeps one entry per (stream, time, line): each needs its own time, the same one when a
        restart sends it again."""
        env = Env()
        try:
            d = env.dir
            os.makedirs(d + "/slurm/nccl/4343")
            os.makedirs(d + "/run/jobs")
            now = time.time()
            with open(d + "/run/jobs/4343", "w") as f:
                json.dump({"job_id": "4343", "node": "n1", "start_ns": int((now - 60) * 1e9), "trace": "none"}, f)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + ".123456+0000"
            line = "n1:77:90 [0] NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory"
            path = d + "/slurm/nccl/4343/0.n1.77.log"
            env.set_sources('{name: nccl, paths: ["%(d)s/slurm/nccl/*/*.log"], job: nccl, format: nccl}')
            # Four written, shipped, the shipper stopped; four more of the same microsecond.
            with open(path, "w") as f:
                f.write(("[%s] %s\n" % (stamp, line)) * 4)
            r = env.once(60)
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            with open(path, "a") as f:
                f.write(("[%s] %s\n" % (stamp, line)) * 4)
            for attempt in range(2):
                r = env.once(60)
                self.assertEqual(r.returncode, 0, r.stderr.decode())
                got = [(ts, l) for ts, l in entries(env, "nccl") if l.endswith(line)]
                self.assertEqual(len(got), 8, (attempt, got))
                self.assertEqual(len({ts for ts, _ in got}), 8, got)
                # Each inside the stamp's own microsecond.
                self.assertEqual(len({ts // 1000 for ts, _ in got}), 1, got)
                # A restart that lost its checkpoint reads and sends all eight again.
                os.unlink(d + "/state/shipper-checkpoint.json")
            stats = json.loads(http("GET", env.url + "/-/stats")[1])
            self.assertGreaterEqual(stats["duplicates"], 8)  # re-sent byte-identical, dropped by Loki
        finally:
            env.close()


class OwnLinesAfterOutage(unittest.TestCase):
    def test_the_shippers_own_warning_goes_as_soon_as_loki_stores_again(self):
        """Loki is down; the shipper says so on {job="jobtrail-shipper"}, and that line backs off
        like the data (here 15 to 30 s). Loki comes back and stores a new stream's line: the
        warning follows within seconds, not when its backoff ends."""
        env = Env()
        try:
            d = env.dir
            os.makedirs(d + "/fresh")
            env.edit_config(("  retry: {min_backoff: 50ms, max_backoff: 500ms}", "  retry: {min_backoff: 30s, max_backoff: 60s}"))
            env.set_sources(Env.APP, '{name: fresh, paths: ["%(d)s/fresh/*.log"], job: fresh}')
            env.fault(mode="status", status=503, body="at least 1 live replicas required\n", count=1_000_000)
            with open(d + "/logs/a.log", "w") as f:
                f.write("written while Loki is down\n")
            env.start()
            # Until the warning itself was refused too (its stream is in backoff now): the data's
            # push, then the shipper's own stream's.
            for _ in range(300):
                refused = json.loads(http("GET", env.url + "/-/stats")[1])["by_status"].get("503", 0)
                if refused >= 2:
                    break
                time.sleep(0.05)
            time.sleep(2)
            env.fault(mode="none")
            with open(d + "/fresh/b.log", "w") as f:
                f.write("first line after Loki came back\n")
            back = time.monotonic()
            own = []
            while time.monotonic() - back < 10 and not any("Loki push failed" in l for l in own):
                own = env.store_lines("jobtrail-shipper")
                time.sleep(0.1)
            self.assertTrue(any("Loki push failed" in l for l in own), own)
            self.assertEqual(env.store_lines("fresh"), ["first line after Loki came back"])
            self.assertEqual(env.store_lines("app"), ["written while Loki is down"])
        finally:
            env.close()


class OnceLastLine(unittest.TestCase):
    def test_once_ships_a_last_line_without_newline(self):
        """`a\\nb` without the final newline: `--once` ships both, in a plain file and an NCCL one;
        and a container's last piece of a line (CRI `P`) whose end is not written yet."""
        env = Env()
        try:
            d = env.dir
            os.makedirs(d + "/nccl/4444")
            os.makedirs(d + "/pods")
            env.set_sources(Env.APP, '{name: nccl, paths: ["%(d)s/nccl/*/*.log"], job: nccl, format: nccl}',
                            '{name: pod, paths: ["%(d)s/pods/*.log"], job: pod, format: cri}')
            now = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
            with open(d + "/pods/0.log", "w") as f:
                f.write("%s.000000001Z stdout F a\n%s.000000002Z stdout P b, its end not yet written\n" % (now, now))
            with open(d + "/logs/a.log", "w") as f:
                f.write("a\nb")
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + ".000001+0000"
            with open(d + "/nccl/4444/0.n1.5.log", "w") as f:
                f.write("[%s] n1:5:5 [0] NCCL WARN a\n[%s] n1:5:5 [0] NCCL WARN b" % (stamp, stamp))
            r = env.once(60)
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            self.assertEqual(env.store_lines("app"), ["a", "b"])
            self.assertEqual(sorted(l[-1] for l in env.store_lines("nccl")), ["a", "b"])
            self.assertEqual(env.store_lines("pod"), ["a", "b, its end not yet written"])
            # Nothing of it again at the next run, nor when the line is ended later.
            with open(d + "/logs/a.log", "a") as f:
                f.write("\nc\n")
            r = env.once(60)
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            self.assertEqual(env.store_lines("app"), ["a", "b", "c"])
        finally:
            env.close()


if __name__ == "__main__":
    skips.main()
