#!/usr/bin/python3
"""jobtrail-shipper against the limits a real Loki 3.4 enforces, through the double: per-stream
and tenant rates, a restart naming 8EB, a proxy's 429, grouped rejections counted in metrics.
Needs JOBTRAIL_BUILD (the build directory) and root (kmsg fixture)."""
import json, os, random, sys, time, unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
import skips  # noqa: E402
from jtsupport import Env, free_port, http, scrape, wait_for_lines  # noqa: E402


def set_files(env, files, batch=None):
    """Replaces the config's file sources with [(name, job)], each reading logs/<name>.log."""
    env.set_sources(*('{name: %s, paths: ["%%(d)s/logs/%s.log"], job: %s}' % (n, n, j) for n, j in files))
    if batch:
        env.edit_config(("batch: {max_bytes: 256KiB", "batch: {max_bytes: %s" % batch))


class Loki3Limits(unittest.TestCase):
    """What a real Loki 3.4 does with limits (../shared/reference/loki3-observed-responses.md §1-3),
    through the double."""

    def test_a_stream_over_its_per_stream_limit_beside_a_trickle_loses_nothing_silently(self):
        # "perstream": 64KB/s, burst 64KB. Loki 3 answers a push for its last stream only: a fast
        # stream refused ahead of an accepted trickle gets 204.
        port = free_port()
        env = Env(loki_args=["--per-stream-rate-kb", "64", "--per-stream-burst-kb", "64"],
                  metrics="127.0.0.1:%d" % port)
        try:
            set_files(env, [("fast", "fast"), ("trickle", "trickle")])
            fast = ["fast %04d %s" % (i, "f" * 990) for i in range(300)]  # ~300 KB at once
            with open(env.dir + "/logs/fast.log", "w") as f:
                f.write("".join(l + "\n" for l in fast))
            env.start()
            trickle = []
            for i in range(20):
                trickle.append("trickle %d" % i)
                with open(env.dir + "/logs/trickle.log", "a") as f:
                    f.write(trickle[-1] + "\n")
                time.sleep(0.1)
            m = {}
            for _ in range(600):  # up to a minute: 300 KB at 64 KB/s takes about five seconds
                m = scrape(port)
                if m.get("jobtrail_shipper_spool_bytes", 1) == 0 and len(env.store_lines("fast")) + \
                        sum(v for k, v in m.items() if k.startswith("jobtrail_shipper_rejected_total")) >= 300:
                    break
                time.sleep(0.1)
            got_fast, got_trickle = env.store_lines("fast"), env.store_lines("trickle")
            rejected = sum(v for k, v in m.items() if k.startswith("jobtrail_shipper_rejected_total"))
            missing = set(fast) - set(got_fast)
            # Every line is in Loki or counted rejected with a reason; none silently missing.
            self.assertEqual(len(missing), rejected, "%d fast lines missing, %d counted rejected" % (len(missing), rejected))
            self.assertEqual(sorted(got_trickle), sorted(trickle))
            self.assertEqual(len(got_fast), len(set(got_fast)))
            self.assertEqual(m["jobtrail_shipper_loki_limit_bytes_per_second{limit=\"per_stream\"}"], 64 * 1024)
            self.assertEqual(rejected, 0)  # 1000-byte lines fit the limit one by one: all arrive
        finally:
            env.close()

    def test_a_loki_restart_naming_8EB_stalls_nothing_and_the_shipper_says_so(self):
        # Reference §12: after a restart the first per-stream refusal of a stream Loki had names
        # "(limit: 8EB/sec)", the next the configured 64KB. Read as 8 B/s it held the stream for
        # hours, and the trickle behind it.
        port = free_port()
        env = Env(loki_args=["--per-stream-rate-kb", "64", "--per-stream-burst-kb", "64"],
                  metrics="127.0.0.1:%d" % port)
        try:
            set_files(env, [("burst", "burst"), ("trickle", "trickle")])
            with open(env.dir + "/logs/burst.log", "w") as f:
                f.write("seed\n")
            env.start()
            wait_for_lines(env, "burst", lambda l: l == ["seed"])
            self.assertEqual(http("POST", env.url + "/-/restart", b"")[0], 204)
            burst = ["burst %04d %s" % (i, "b" * 90) for i in range(3000)]  # ~300 KB at once
            with open(env.dir + "/logs/burst.log", "a") as f:
                f.write("".join(l + "\n" for l in burst))
            trickle = []
            for i in range(50):
                trickle.append("trickle %d" % i)
                with open(env.dir + "/logs/trickle.log", "a") as f:
                    f.write(trickle[-1] + "\n")
                time.sleep(0.05)
            # A bound on a stall (300 KB at 64 KB/s is about five seconds), not a figure.
            got = wait_for_lines(env, "burst", lambda l: len(l) >= 3001, tries=900)
            self.assertEqual(sorted(got), sorted(["seed"] + burst))
            self.assertEqual(sorted(wait_for_lines(env, "trickle", lambda l: len(l) >= 50)), sorted(trickle))
            self.assertEqual(scrape(port)["jobtrail_shipper_loki_limit_bytes_per_second{limit=\"per_stream\"}"],
                             64 * 1024)
            # The operator is told, on the shipper's own stream, that Loki named a limit it cannot mean.
            said = wait_for_lines(env, "jobtrail-shipper", lambda l: any("cannot be the limit" in x for x in l))
            self.assertTrue(any("8EB" in x or str(2 ** 63) in x for x in said if "cannot be the limit" in x))
        finally:
            env.close()

    def test_a_429_from_a_proxy_with_no_limit_in_its_body_shrinks_the_push_until_lines_go(self):
        # Not Loki's wording: a proxy in front of it. The same push again would be refused again.
        env = Env()
        try:
            set_files(env, [("app", "app")])
            rnd = random.Random(24)
            lines = ["proxy %04d %s" % (i, "%0200x" % rnd.getrandbits(800)) for i in range(2000)]
            with open(env.dir + "/logs/app.log", "w") as f:
                f.write("".join(l + "\n" for l in lines))
            # Every push over 20 KB (compressed) is refused, for as long as the test runs.
            env.fault(mode="status", status=429, body="<html><body><h1>429 Too Many Requests</h1></body></html>\n",
                      min_bytes=20000)
            env.start()
            got = wait_for_lines(env, "app", lambda l: len(l) >= 2000, tries=600)
            self.assertEqual(got, lines)  # each once, in order
        finally:
            env.close()

    def test_a_4mib_batch_against_a_2mb_tenant_burst_arrives_and_other_streams_are_not_held(self):
        env = Env(loki_args=["--ingestion-rate-mb", "1", "--burst-mb", "2"])  # "strict"
        try:
            set_files(env, [("big", "big"), ("other", "other")], batch="4MiB")
            big = ["big %05d %s" % (i, "b" * 1014) for i in range(4096)]  # 4 MiB
            with open(env.dir + "/logs/big.log", "w") as f:
                f.write("".join(l + "\n" for l in big))
            env.start()
            time.sleep(1)
            waits = []
            for i in range(5):
                line = "other %d" % i
                with open(env.dir + "/logs/other.log", "a") as f:
                    f.write(line + "\n")
                t0 = time.time()
                wait_for_lines(env, "other", lambda ls: line in ls, tries=600)
                waits.append(time.time() - t0)
            # Arrival of the other stream's lines while the big batch goes through (generous).
            self.assertLess(max(waits), 15, waits)
            got = wait_for_lines(env, "big", lambda ls: len(ls) >= 4096, tries=1200)
            self.assertEqual(sorted(got), sorted(big))
        finally:
            env.close()

    def test_rejections_in_metrics_equal_what_loki_refused_for_a_grouped_body(self):
        # "strict" line size: 2048 B. Loki 3 answers "N errors like: ...; M errors like: ..." for
        # long lines of two lengths, one push, one line.
        port = free_port()
        env = Env(loki_args=["--max-line-size", "2048"], metrics="127.0.0.1:%d" % port)
        try:
            lines = []
            for i in range(100):
                lines.append("line %03d " % i + ("L" * (2990 + i % 2) if i % 10 < 3 else "short"))
            with open(env.dir + "/logs/app.log", "w") as f:
                f.write("".join(l + "\n" for l in lines))
            env.start()
            m, stats, store = {}, {}, []
            for _ in range(300):
                m = scrape(port)
                stats = json.loads(http("GET", env.url + "/-/stats")[1])
                store = [e for s in json.loads(http("GET", env.url + "/-/store")[1]) for e in s["entries"]]
                if m.get("jobtrail_shipper_spool_bytes", 1) == 0 and stats["rejected"] and \
                        m["jobtrail_shipper_records_sent_total"] == len(store):
                    break
                time.sleep(0.1)
            self.assertEqual(stats["rejected"], {"line_too_long": 30})
            self.assertEqual(m.get('jobtrail_shipper_rejected_total{reason="line_too_long"}'), 30)
            self.assertEqual([k for k in m if k.startswith("jobtrail_shipper_rejected_total")],
                             ['jobtrail_shipper_rejected_total{reason="line_too_long"}'])
            self.assertEqual(sorted(env.store_lines("app")), sorted(l for l in lines if l.endswith("short")))
            # Only what Loki kept counts as sent, and its bytes.
            self.assertEqual(m["jobtrail_shipper_records_sent_total"], len(store))
            self.assertEqual(m["jobtrail_shipper_bytes_sent_total"], sum(len(e[1].encode()) for e in store))
        finally:
            env.close()


if __name__ == "__main__":
    skips.main()
