#!/usr/bin/python3
"""jobtrail-shipper end to end against the Loki test double: every line arrives exactly once
through Loki outages, 429 storms, timeouts, SIGKILLs at random moments, file rotation and
copytruncate, with the design's labels and in the order written.
Needs JOBTRAIL_BUILD (the build directory) and root (kmsg fixture)."""
import json, os, random, shutil, sys, time, unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
import skips  # noqa: E402
from jtsupport import HAVE_JOURNAL, JOURNAL_REMOTE, Env, http  # noqa: E402


class ExactlyOnce(unittest.TestCase):
    def test_200k_lines_through_outages_429s_kills_and_rotation(self):
        if not HAVE_JOURNAL:
            skips.partly(self, "journal lines not tested: no %s (apt install systemd-journal-remote)" % JOURNAL_REMOTE)
        env = Env()
        try:
            expected_files, expected_kmsg, expected_journal = [], [], []
            rnd = random.Random(42)
            env.start()
            n = 0
            for round_ in range(20):
                # 10,000 lines a round over 4 files, plus kernel records
                for i in range(4):
                    with open(env.dir + "/logs/f%d.log" % i, "a") as f:
                        for _ in range(2500):
                            line = "file %d line %06d %s" % (i, n, "x" * 40)
                            f.write(line + "\n")
                            expected_files.append(line)
                            n += 1
                k = ["kernel record %d-%d" % (round_, j) for j in range(100)]
                env.kmsg(k)
                expected_kmsg += k
                if HAVE_JOURNAL:
                    jl = ["slurmd said %d-%d" % (round_, j) for j in range(100)]
                    env.journal(jl)
                    expected_journal += jl
                action = round_ % 5
                if action == 0:
                    env.fault(mode="status", status=503, body="at least 1 live replicas required\n", count=5)
                elif action == 1:
                    env.fault(mode="status", status=429, body="Ingestion rate limit exceeded for user fake\n", count=5)
                elif action == 2:
                    env.fault(mode="slow", delay=3, count=1)  # past the 2 s timeout
                elif action == 3 and round_ == 8:
                    os.rename(env.dir + "/logs/f0.log", env.dir + "/logs/f0.log.1")  # rename rotation
                time.sleep(rnd.uniform(0.1, 0.6))
                env.kill()  # SIGKILL at a random moment
                env.start()
            env.kill()
            env.fault(mode="none")
            r = env.once()
            self.assertEqual(r.returncode, 0, r.stderr.decode()[-2000:])
            got = env.store_lines("app")
            self.assertEqual(len(expected_files), 200_000)
            missing = set(expected_files) - set(got)
            self.assertEqual(len(missing), 0, "%d lines missing, e.g. %s" % (len(missing), sorted(missing)[:3]))
            self.assertEqual(len(got), len(set(got)), "duplicates in the store")
            self.assertEqual(len(got), 200_000)
            k = env.store_lines("kmsg")
            self.assertEqual(set(k), set(expected_kmsg))
            self.assertEqual(len(k), 2000)
            j = env.store_lines("systemd-journal")
            self.assertEqual(sorted(j), sorted(expected_journal))  # each once, none missing
            self.check_labels_metadata_and_order(env)
        finally:
            env.close()

    def check_labels_metadata_and_order(self, env):
        """Every stream has the design's labels (no filename), kernel records carry their seq as
        structured metadata, and in time order each file's lines and the kernel's records come in
        the order they were written, through all the kills and the rotation."""
        doc = json.loads(http("GET", env.url + "/-/store")[1])
        want = {"app": {"cluster", "node", "job", "service_name"},
                "kmsg": {"cluster", "node", "job", "service_name", "priority"},
                "systemd-journal": {"cluster", "node", "job", "service_name", "priority", "unit"},
                "jobtrail-shipper": {"cluster", "node", "job", "service_name"}}
        by_file, kernel = {}, []
        for s in doc:
            job = s["labels"]["job"]
            # Loki's own: a stream faster than shard_streams' desired_rate (1536KB/s) is stored
            # in shards, __stream_shard__="0".."N-1" (the double does it too).
            self.assertTrue(s["labels"].get("__stream_shard__", "0").isdigit(), s["labels"])
            self.assertEqual(set(s["labels"]) - {"__stream_shard__"}, want[job], s["labels"])
            self.assertEqual((s["labels"]["cluster"], s["labels"]["node"]), ("e2e", "n1"))
            for ts, line, sm in s["entries"]:
                if job == "app":
                    f, n = line.split()[1], int(line.split()[3])
                    by_file.setdefault(f, []).append((int(ts), n))
                elif job == "kmsg":
                    kernel.append((int(ts), int(sm["seq"]), line))
        for f, entries in by_file.items():
            nums = [n for _, n in sorted(entries)]
            self.assertEqual(nums, sorted(nums), "file %s out of order" % f)
        kernel.sort()
        seqs = [q for _, q, _ in kernel]
        self.assertEqual(seqs, sorted(seqs))
        self.assertEqual(len(set(seqs)), len(seqs))

    def test_copytruncate_during_ingest(self):
        env = Env()
        try:
            with open(env.dir + "/logs/app.log", "w") as f:
                f.write("".join("before %d\n" % i for i in range(1000)))
            self.assertEqual(env.once().returncode, 0)
            shutil.copy(env.dir + "/logs/app.log", env.dir + "/copy.1")
            with open(env.dir + "/logs/app.log", "r+") as f:
                f.truncate(0)
            with open(env.dir + "/logs/app.log", "a") as f:
                f.write("".join("after %d\n" % i for i in range(10)))
            self.assertEqual(env.once().returncode, 0)
            got = env.store_lines("app")
            self.assertEqual(len(got), 1010)
            self.assertEqual(len(set(got)), 1010)
        finally:
            env.close()


if __name__ == "__main__":
    skips.main()
