#!/usr/bin/python3
"""jobtrail-shipper against what Loki answers: a partial 400 is not retried, a 413 splits the
batch, TLS verifies the server, the metrics say what the shipper does, a full spool pauses the
sources and loses nothing, SIGTERM returns while Loki hangs.
Needs JOBTRAIL_BUILD (the build directory) and root (kmsg fixture)."""
import json, os, random, shutil, signal, subprocess, sys, tempfile, time, unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
import skips  # noqa: E402
from jtsupport import Env, free_port, http, scrape, wait_for_lines  # noqa: E402


class LokiAnswers(unittest.TestCase):
    def test_partial_400_is_not_retried_and_the_rest_arrives_once(self):
        env = Env(loki_args=["--max-line-size", "200"])
        try:
            with open(env.dir + "/logs/app.log", "w") as f:
                for i in range(100):
                    f.write(("long %d " % i + "y" * 300 if i % 10 == 0 else "short %d" % i) + "\n")
            r = env.once(timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            self.assertIn(b"Loki rejected", r.stderr)
            got = env.store_lines("app")
            self.assertEqual(sorted(got), sorted("short %d" % i for i in range(100) if i % 10))
            stats = json.loads(http("GET", env.url + "/-/stats")[1])
            self.assertLess(stats["pushes"], 5)  # no retry loop on 400
        finally:
            env.close()

    def test_413_splits_the_batch_until_it_fits_and_each_line_arrives_once(self):
        env = Env(loki_args=["--max-recv-bytes", "20000"])
        try:
            rnd = random.Random(7)
            lines = ["big %04d %s" % (i, "%0100x" % rnd.getrandbits(400)) for i in range(2000)]  # ~220 KB, incompressible
            with open(env.dir + "/logs/app.log", "w") as f:
                f.write("".join(l + "\n" for l in lines))
            r = env.once(timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr.decode()[-2000:])
            got = env.store_lines("app")
            self.assertEqual(sorted(got), sorted(lines))
            stats = json.loads(http("GET", env.url + "/-/stats")[1])
            self.assertGreater(stats["by_status"].get("413", 0), 0)  # it did have to split
        finally:
            env.close()

    def test_tls_verifies_the_server_against_the_configured_ca(self):
        certs = tempfile.mkdtemp(prefix="jobtrail-tls-")
        try:
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                            "-keyout", certs + "/key.pem", "-out", certs + "/cert.pem", "-subj", "/CN=127.0.0.1",
                            "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
            tls = ["--tls-cert", certs + "/cert.pem", "--tls-key", certs + "/key.pem"]
            # Verification is on by default: a server our CA file does not vouch for gets nothing.
            env = Env(loki_args=tls, scheme="https")
            try:
                with open(env.dir + "/logs/app.log", "w") as f:
                    f.write("over tls\n")
                r = env.once(timeout=5)
                self.assertNotEqual(r.returncode, 0)
                self.assertEqual(env.store_lines("app"), [])
            finally:
                env.close()
            env = Env(loki_args=tls, scheme="https", loki_extra=', ca_file: "%s/cert.pem"' % certs)
            try:
                with open(env.dir + "/logs/app.log", "w") as f:
                    f.write("over tls\n")
                r = env.once(timeout=30)
                self.assertEqual(r.returncode, 0, r.stderr.decode()[-2000:])
                self.assertEqual(env.store_lines("app"), ["over tls"])
            finally:
                env.close()
        finally:
            shutil.rmtree(certs, ignore_errors=True)

    def test_metrics_tell_an_operator_what_the_shipper_is_doing(self):
        port = free_port()
        env = Env(metrics="127.0.0.1:%d" % port)

        def wait_for(pred):
            for _ in range(150):
                m = scrape(port)
                if pred(m):
                    return m
                time.sleep(0.1)
            self.fail("metrics never got there: %s" % m)

        try:
            with open(env.dir + "/logs/app.log", "w") as f:
                f.write("".join("line %d\n" % i for i in range(500)) + "\n\n")
            env.kmsg(["hello kernel"])
            env.start()
            m = wait_for(lambda m: m.get("jobtrail_shipper_records_sent_total", 0) >= 501)
            self.assertEqual(m["jobtrail_shipper_records_read_total"], 504)  # 500 + 2 blank + 1 kernel + heartbeat
            self.assertEqual(m['jobtrail_shipper_dropped_total{reason="blank"}'], 2)
            self.assertEqual(m['jobtrail_shipper_source_backlog_bytes{source="app"}'], 0)
            self.assertGreater(m["jobtrail_shipper_last_success_timestamp_seconds"], time.time() - 60)
            # Loki refuses: the spool fills, the oldest record ages, retries count up.
            env.fault(mode="status", status=503, body="at least 1 live replicas required\n")
            with open(env.dir + "/logs/app.log", "a") as f:
                f.write("".join("later %d\n" % i for i in range(100)))
            m = wait_for(lambda m: m["jobtrail_shipper_spool_oldest_age_seconds"] >= 2)
            self.assertGreater(m["jobtrail_shipper_spool_bytes"], 0)
            self.assertGreater(m["jobtrail_shipper_retries_total"], 0)
            env.fault(mode="none")
            m = wait_for(lambda m: m["jobtrail_shipper_spool_bytes"] == 0)
            self.assertEqual(m["jobtrail_shipper_spool_oldest_age_seconds"], 0)
            self.assertGreaterEqual(m["jobtrail_shipper_records_sent_total"], 601)
            # The shipper's own stream: a heartbeat (what the "stopped sending" alert watches) and
            # the outage it lived through, in Loki next to the logs.
            own = wait_for_lines(env, "jobtrail-shipper", lambda ls: any("Loki push failed" in l for l in ls))
            self.assertTrue(any(l.startswith("heartbeat version=") for l in own), own)
        finally:
            env.close()

    def test_spool_full_pauses_sources_and_loses_nothing(self):
        env = Env(shipper_yaml="  spool: {max_size: 16MiB}")  # the smallest spool the config takes
        try:
            env.fault(mode="status", status=503, body="unavailable\n")  # until told otherwise
            with open(env.dir + "/logs/app.log", "w") as f:
                for i in range(110_000):
                    f.write("spooled line %06d %s\n" % (i, "z" * 150))
            env.start()
            time.sleep(4)
            env.kill()
            spool_bytes = sum(os.path.getsize(os.path.join(env.dir, "state/spool", f))
                              for f in os.listdir(env.dir + "/state/spool") if f.startswith("seg-"))
            self.assertLess(spool_bytes, 16 << 20)
            env.fault(mode="none")
            r = env.once(timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr.decode()[-2000:])
            got = env.store_lines("app")
            expected = {"spooled line %06d %s" % (i, "z" * 150) for i in range(110_000)}
            extra = [g for g in got if g not in expected]
            self.assertEqual(extra, [], "lines that were never written (first 2): %s" % [e[:60] for e in extra[:2]])
            self.assertEqual(len(got), 110_000)
            self.assertEqual(len(set(got)), 110_000)
        finally:
            env.close()

    def test_sigterm_returns_within_bounds_while_loki_hangs(self):
        env = Env()
        try:
            env.fault(mode="slow", delay=30)
            with open(env.dir + "/logs/app.log", "w") as f:
                f.write("a line\n")
            env.start()
            time.sleep(1.5)
            t0 = time.time()
            env.proc.send_signal(signal.SIGTERM)
            env.proc.wait(timeout=15)
            self.assertLess(time.time() - t0, 5)  # one request timeout (2 s) plus slack
            env.fault(mode="none")
            self.assertEqual(env.once().returncode, 0)
            self.assertEqual(env.store_lines("app"), ["a line"])
        finally:
            env.close()


if __name__ == "__main__":
    skips.main()
