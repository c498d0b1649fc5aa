#!/usr/bin/python3
"""jobtrail-shipper end to end against the Loki test double: every line arrives exactly once
through Loki outages, 429 storms, partial 400s, timeouts, SIGKILLs at random moments, file
rotation and a full spool. Needs JOBTRAIL_BUILD (the build directory) and root (kmsg fixture)."""
import json, os, random, re, shutil, signal, ssl, subprocess, sys, tempfile, time, unittest, urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
import skips  # noqa: E402

BUILD = os.environ.get("JOBTRAIL_BUILD", os.path.join(os.path.dirname(__file__), "../../build"))
SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
SHIPPER = os.path.join(BUILD, "shipper/jobtrail-shipper")
KMSGFS = os.path.join(BUILD, "tests/fixtures/kmsgfs/kmsgfs")
JOURNAL_REMOTE = "/lib/systemd/systemd-journal-remote"
HAVE_JOURNAL = os.access(JOURNAL_REMOTE, os.X_OK)


def http(method, url, body=None):
    req = urllib.request.Request(url, data=body, method=method)
    try:
        # The test's own reads of the double's store; the shipper's TLS is what is under test.
        ctx = ssl._create_unverified_context() if url.startswith("https") else None
        with urllib.request.urlopen(req, timeout=30, context=ctx) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Env:
    def __init__(self, loki_args=(), shipper_yaml="", scheme="http", loki_extra="", metrics=""):
        self.dir = tempfile.mkdtemp(prefix="jobtrail-e2e-")
        os.makedirs(self.dir + "/logs")
        os.makedirs(self.dir + "/mnt")
        os.makedirs(self.dir + "/journal")
        self.journal_files = 0
        pf = self.dir + "/port"
        self.loki = subprocess.Popen(["/usr/bin/python3", SRC + "/tests/loki_double/loki_double.py", "--port-file", pf]
                                     + list(loki_args), stdout=subprocess.DEVNULL)
        self.fs = subprocess.Popen([KMSGFS, self.dir + "/mnt", "--ring-bytes", str(4 << 20)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(300):
            if os.path.exists(pf) and os.path.exists(self.dir + "/mnt/ctl"):
                break
            time.sleep(0.02)
        with open(pf) as f:
            self.url = scheme + "://127.0.0.1:" + f.read()
        with open(self.dir + "/cfg.yaml", "w") as f:
            f.write("""cluster: e2e
node: n1
collector:
  state_dir: %(d)s/state
  run_dir: %(d)s/run
  kmsg: %(d)s/mnt/kmsg
shipper:
  loki: {url: "%(url)s", timeout: 2s%(loki_extra)s}
  batch: {max_bytes: 256KiB, max_wait: 200ms}
  retry: {min_backoff: 50ms, max_backoff: 500ms}
  metrics: "%(metrics)s"
  sources:
    files:
      - {name: app, paths: ["%(d)s/logs/*.log"], job: app}
    journald: {units: [slurmd.service], directory: "%(d)s/journal"}
%(extra)s
""" % {"d": self.dir, "url": self.url, "extra": shipper_yaml, "loki_extra": loki_extra, "metrics": metrics})
        self.proc = None

    def kmsg(self, lines):
        with open(self.dir + "/mnt/ctl", "w") as f:
            f.write("".join("6;%s\n" % l for l in lines))

    def journal(self, messages):
        """Appends entries as journald would, in a new journal file (as after a rotation)."""
        now = int(time.time() * 1e6)
        exp = "".join("__REALTIME_TIMESTAMP=%d\n__MONOTONIC_TIMESTAMP=%d\n_BOOT_ID=%s\n_SYSTEMD_UNIT=slurmd.service\n"
                      "PRIORITY=6\nMESSAGE=%s\n\n" % (now + i, now + i, "0" * 32, m) for i, m in enumerate(messages))
        self.journal_files += 1
        subprocess.run([JOURNAL_REMOTE, "-o", "%s/journal/r%03d.journal" % (self.dir, self.journal_files), "-"],
                       input=exp.encode(), check=True, stderr=subprocess.DEVNULL)

    def start(self):
        self.proc = subprocess.Popen([SHIPPER, "--config", self.dir + "/cfg.yaml"], stderr=subprocess.DEVNULL)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def once(self, timeout=120):
        return subprocess.run([SHIPPER, "--config", self.dir + "/cfg.yaml", "--once", "--once-timeout", str(timeout)],
                              stderr=subprocess.PIPE, timeout=timeout + 30)

    def fault(self, **kw):
        http("POST", self.url + "/-/fault", json.dumps(kw).encode())

    def store_lines(self, job):
        doc = json.loads(http("GET", self.url + "/-/store")[1])
        out = []
        for s in doc:
            if s["labels"].get("job") == job:
                out += [e[1] for e in s["entries"]]
        return out

    def close(self):
        self.kill()
        self.loki.terminate()
        self.loki.wait()
        subprocess.run(["umount", "-l", self.dir + "/mnt"], stderr=subprocess.DEVNULL)
        self.fs.terminate()
        self.fs.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_for_lines(env, job, pred, tries=100):
    for _ in range(tries):
        lines = env.store_lines(job)
        if pred(lines):
            return lines
        time.sleep(0.1)
    raise AssertionError("%s lines never matched: %s" % (job, env.store_lines(job)[:20]))


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
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        env = Env(metrics="127.0.0.1:%d" % port)

        def scrape():
            for _ in range(100):
                try:
                    st, body = http("GET", "http://127.0.0.1:%d/metrics" % port)
                    return {l.rsplit(" ", 1)[0]: float(l.rsplit(" ", 1)[1]) for l in body.splitlines()
                            if l and not l.startswith("#")}
                except OSError:
                    time.sleep(0.1)
            self.fail("no /metrics")

        def wait_for(pred):
            for _ in range(150):
                m = scrape()
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


class HostileInput(unittest.TestCase):
    def test_a_file_name_that_is_not_utf8_never_stops_the_shipper(self):
        """A user's `\\xff.log` once made the checkpoint unwritable and the shipper abort on every
        restart, kmsg included. It must keep shipping that file, the others and the kernel's."""
        env = Env()
        try:
            bad = env.dir.encode() + b"/logs/\xff\xfe.log"
            with open(bad, "wb") as f:
                f.write(b"from the odd name\n")
            with open(env.dir + "/logs/plain.log", "w") as f:
                f.write("from the plain name\n")
            env.kmsg(["kernel before restart"])
            for rnd in range(3):  # the checkpoint is written, read back and written again
                r = env.once(60)
                self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
                with open(bad, "ab") as f:
                    f.write(b"odd again %d\n" % rnd)
                env.kmsg(["kernel after restart %d" % rnd])
            r = env.once(60)
            self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
            app = env.store_lines("app")
            self.assertEqual(sorted(app), sorted(["from the odd name", "from the plain name", "odd again 0",
                                                  "odd again 1", "odd again 2"]))
            kmsg = [l for l in env.store_lines("kmsg") if l.startswith("kernel ")]
            self.assertEqual(sorted(kmsg), sorted(["kernel before restart"] +
                                                  ["kernel after restart %d" % i for i in range(3)]))
        finally:
            env.close()

    def test_ten_thousand_files_in_one_job_directory_are_bounded_and_nothing_is_duplicated(self):
        env = Env(shipper_yaml="")
        try:
            d = env.dir
            os.makedirs(d + "/nccl/77")
            for i in range(10000):
                with open(d + "/nccl/77/0.n1.%d.log" % i, "w") as f:
                    f.write("rank %d says hello\n" % i)
            with open(d + "/logs/app.log", "w") as f:
                f.write("the other logs still ship\n")
            with open(d + "/cfg.yaml") as f:
                cfg = f.read()
            cfg = cfg.replace('      - {name: app, paths: ["%s/logs/*.log"], job: app}' % d,
                              '      - {name: app, paths: ["%s/logs/*.log"], job: app}\n'
                              '      - {name: nccl, paths: ["%s/nccl/*/*.log"], job: nccl, format: nccl}' % (d, d))
            with open(d + "/cfg.yaml", "w") as f:
                f.write(cfg)
            for _ in range(2):  # and again after a restart: still nothing twice
                r = env.once(120)
                self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace")[-2000:])
            nccl = env.store_lines("nccl")
            self.assertEqual(len(nccl), 512)  # the default max_files_per_dir
            self.assertEqual(len(set(nccl)), 512)
            self.assertEqual(env.store_lines("app"), ["the other logs still ship"])
            said = r.stderr.decode(errors="replace")
            self.assertIn("not reading 9488 more files: over the limit", said)
            print("peak RSS of the shipper runs (KiB, ASan included): %d"
                  % __import__("resource").getrusage(__import__("resource").RUSAGE_CHILDREN).ru_maxrss)
        finally:
            env.close()

    def test_ten_thousand_tracked_files_hold_bounded_descriptors_and_arrive_once(self):
        """Every one of a job user's 10,000 files tracked (the caps raised past them): once each
        shipper held a descriptor per file; now idle files are closed and opened again, so the
        descriptors stay under max_open_files, and each line still arrives once, across a
        restart and a second line in every file."""
        env = Env()
        try:
            d = env.dir
            job = d + "/nccl/77"
            os.makedirs(job)
            os.chown(job, 65534, 65534)  # the job user's directory and files, as on a node
            names = [job + "/0.n1.%d.log" % i for i in range(10000)]
            for i, p in enumerate(names):
                with open(p, "w") as f:
                    f.write("rank %d first\n" % i)
                os.chown(p, 65534, 65534)
            with open(d + "/cfg.yaml") as f:
                cfg = f.read()
            cfg = cfg.replace('      - {name: app, paths: ["%s/logs/*.log"], job: app}' % d,
                              '      - {name: app, paths: ["%s/logs/*.log"], job: app}\n'
                              '      - {name: nccl, paths: ["%s/nccl/*/*.log"], job: nccl, format: nccl,\n'
                              '         max_files: 20000, max_files_per_dir: 20000, max_files_per_owner: 20000}'
                              % (d, d))
            with open(d + "/cfg.yaml", "w") as f:
                f.write(cfg)
            peaks = []
            for rnd in range(2):
                if rnd:
                    for i, p in enumerate(names):
                        with open(p, "a") as f:
                            f.write("rank %d second\n" % i)
                rc, err, fds, rss = once_sampled(env)
                self.assertEqual(rc, 0, err[-2000:])
                peaks.append((fds, rss))
                # max_open_files (256) for the NCCL files, plus the shipper's own few
                self.assertLess(fds, 256 + 64, "open descriptors while shipping 10,000 files")
            nccl = env.store_lines("nccl")
            self.assertEqual(len(nccl), 20000)
            self.assertEqual(len(set(nccl)), 20000, "a line arrived twice")
            self.assertEqual(set(nccl), {"rank %d %s" % (i, w) for i in range(10000) for w in ("first", "second")})
            for rnd, (fds, rss) in enumerate(peaks):
                print("10,000 tracked files, run %d: peak %d open fds, peak RSS %.1f MiB (this build; "
                      "bench/shipper_files.py for a Release figure)" % (rnd + 1, fds, rss / 1024))
        finally:
            env.close()


def once_sampled(env, timeout=120):
    """env.once(), sampling the shipper's open descriptors and VmHWM every 10 ms while it runs.
    Returns (returncode, stderr, peak fds, peak RSS KiB)."""
    import threading
    p = subprocess.Popen([SHIPPER, "--config", env.dir + "/cfg.yaml", "--once", "--once-timeout", str(timeout)],
                         stderr=subprocess.PIPE)
    peak = {"fds": 0, "rss": 0}

    def sample():
        while p.poll() is None:
            try:
                peak["fds"] = max(peak["fds"], len(os.listdir("/proc/%d/fd" % p.pid)))
                with open("/proc/%d/status" % p.pid) as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            peak["rss"] = max(peak["rss"], int(line.split()[1]))
            except OSError:
                pass
            time.sleep(0.01)

    t = threading.Thread(target=sample)
    t.start()
    _, err = p.communicate(timeout=timeout + 30)
    t.join()
    return p.returncode, err.decode(errors="replace"), peak["fds"], peak["rss"]


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def scrape(port):
    for _ in range(100):
        try:
            _, body = http("GET", "http://127.0.0.1:%d/metrics" % port)
            return {l.rsplit(" ", 1)[0]: float(l.rsplit(" ", 1)[1]) for l in body.splitlines()
                    if l and not l.startswith("#")}
        except OSError:
            time.sleep(0.1)
    raise AssertionError("no /metrics")


def set_files(env, files, batch=None):
    """Replaces the config's file sources with [(name, job)], each reading logs/<name>.log."""
    with open(env.dir + "/cfg.yaml") as f:
        cfg = f.read()
    cfg = cfg.replace('      - {name: app, paths: ["%s/logs/*.log"], job: app}' % env.dir,
                      "\n".join('      - {name: %s, paths: ["%s/logs/%s.log"], job: %s}' % (n, env.dir, n, j)
                                for n, j in files))
    if batch:
        cfg = cfg.replace("batch: {max_bytes: 256KiB", "batch: {max_bytes: %s" % batch)
    with open(env.dir + "/cfg.yaml", "w") as f:
        f.write(cfg)


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
        with open(d + "/cfg.yaml") as f:
            cfg = f.read()
        cfg = cfg.replace('      - {name: app, paths: ["%s/logs/*.log"], job: app}' % d,
                          '      - {name: fm, paths: ["%s/logs/fm.log"], job: fabric-manager, stream: fabric-manager}\n'
                          '      - {name: nccl, paths: ["%s/nccl/*/*.log"], job: nccl, format: nccl}' % (d, d))
        with open(d + "/cfg.yaml", "w") as f:
            f.write(cfg)
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


class NodeContract(unittest.TestCase):
    def test_renamed_job_values_keep_noise_filtering_job_tagging_and_the_bundle(self):
        """An operator renames every file source's `job`: the NCCL noise stage, the kernel
        records' job tagging, `jobtrail logql` and `jobtrail bundle` still find the job."""
        env = Env()
        try:
            d = env.dir
            for sub in ("slurm/prolog", "slurm/epilog", "slurm/nccl/4242", "run/jobs"):
                os.makedirs(d + "/" + sub, exist_ok=True)
            now = time.time()
            iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
            with open(d + "/run/jobs/4242", "w") as f:
                json.dump({"job_id": "4242", "node": "n1", "start_ns": int((now - 60) * 1e9), "trace": "none"}, f)
            with open(d + "/slurm/prolog/4242.log", "w") as f:
                f.write("%s.000000001Z meta phase=prolog\n%s.000000002Z meta node=n1\n"
                        "%s.000000003Z stdout[10-site.sh] renamed prolog line\n"
                        "%s.000000004Z end status=0 duration_ms=1.0 scripts_run=1\n" % (iso, iso, iso, iso))
            with open(d + "/slurm/nccl/4242/0.n1.77.log", "w") as f:
                f.write("[%s.000000+0000] n1:77:77 [0] NCCL INFO Channel 00/02 : 0 1\n" % iso)
                f.write("[%s.000001+0000] n1:77:77 [0] NCCL WARN renamed stream still ships\n" % iso)
            with open(d + "/cfg.yaml") as f:
                cfg = f.read()
            cfg = cfg.replace("  state_dir:", "  log_dir: %s/slurm\n  state_dir:" % d)
            cfg = cfg.replace('      - {name: app, paths: ["%s/logs/*.log"], job: app}' % d,
                              '      - {name: jobs, paths: ["%s/slurm/{prolog,epilog}/*.log"], job: gpu-jobs, format: joblog}\n'
                              '      - {name: nccl, paths: ["%s/slurm/nccl/*/*.log"], job: gpu-nccl, format: nccl}' % (d, d))
            with open(d + "/cfg.yaml", "w") as f:
                f.write(cfg)
            env.kmsg(["NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus."])
            r = env.once(60)
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            nccl = env.store_lines("gpu-nccl")
            self.assertTrue(any("renamed stream still ships" in l for l in nccl), nccl)
            self.assertFalse(any("NCCL INFO Channel" in l for l in nccl), "noise of an untraced job kept")
            self.assertEqual(env.store_lines("nccl"), [])
            self.assertTrue(any("renamed prolog line" in l for l in env.store_lines("gpu-jobs")))
            doc = json.loads(http("GET", env.url + "/-/store")[1])
            kmsg = [e for s in doc if s["labels"].get("job") == "kmsg" for e in s["entries"]]
            self.assertTrue(any("Xid" in e[1] and "4242" in json.dumps(e[2:]) for e in kmsg), kmsg)
            cli = os.path.join(BUILD, "cli/jobtrail")
            q = subprocess.run([cli, "--config", d + "/cfg.yaml", "logql", "4242", "--nodes", "n1"],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(q.returncode, 0, q.stderr)
            self.assertIn('{job="gpu-nccl", job_id="4242"}', q.stdout)
            self.assertIn('{job="gpu-jobs", job_id="4242"}', q.stdout)
            out = d + "/bundle"
            os.makedirs(out)
            b = subprocess.run([cli, "--config", d + "/cfg.yaml", "--loki-url", env.url, "bundle", "4242",
                                "--output-dir", out, "--lookback", "1h"], capture_output=True, text=True, timeout=120)
            self.assertEqual(b.returncode, 0, b.stdout + b.stderr)
            archive = [f for f in os.listdir(out) if f.endswith(".tar.zst")][0]
            listing = subprocess.run(["tar", "--zstd", "-xOf", out + "/" + archive, "--wildcards", "*timeline.txt"],
                                     capture_output=True, text=True, timeout=30).stdout
            self.assertIn("renamed stream still ships", listing)
            self.assertIn("renamed prolog line", listing)
        finally:
            env.close()


def with_prolog(env, script, replace):
    """Job logs under env.dir/slurm, written by a prolog that runs `script` (shell); the config's
    `replace` (old, new) applied too."""
    d = env.dir
    os.makedirs(d + "/slurm")
    with open(d + "/site.sh", "w") as f:
        f.write("#!/bin/sh\n%s\n" % script)
    os.chmod(d + "/site.sh", 0o755)
    with open(d + "/cfg.yaml") as f:
        cfg = f.read()
    cfg = cfg.replace("  state_dir:", "  log_dir: %s/slurm\n  prolog: {scripts: [%s/site.sh]}\n  state_dir:" % (d, d))
    with open(d + "/cfg.yaml", "w") as f:
        f.write(cfg.replace(*replace))


class Stamps(unittest.TestCase):
    def test_identical_lines_and_kernel_records_all_arrive_once(self):
        """A site script prints `ok` eight times in one write and the kernel prints one mlx5
        error three times in one microsecond: Loki keeps one entry per (stream, time, line), so
        each needs its own time. A restart without its checkpoint re-sends the same bytes."""
        env = Env()
        try:
            d = env.dir
            with_prolog(env, "printf 'ok\\nok\\nok\\nok\\nok\\nok\\nok\\nok\\n'",
                        ('      - {name: app, paths: ["%s/logs/*.log"], job: app}' % d,
                         '      - {name: jobs, paths: ["%s/slurm/prolog/*.log"], job: jobs, format: joblog}' % d))
            mlx = "mlx5_core 0000:5e:00.0: mlx5_cmd_out_err:838: ACCESS_REG(0x805) op_mod(0x1) failed"
            with open(d + "/mnt/ctl", "w") as f:
                f.write("3,7000000;%s\n" % mlx * 3)
            p = subprocess.run([os.path.join(BUILD, "prolog/jobtrail-prolog"), "--config", d + "/cfg.yaml"],
                               env=dict(os.environ, SLURM_JOB_ID="5151"), capture_output=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(d + "/slurm/prolog/5151.log") as f:
                stamps = [l.split(" ")[0] for l in f if " stdout[site.sh] ok" in l]
            self.assertEqual(len(stamps), 8)
            self.assertEqual(len(set(stamps)), 8, stamps)
            for attempt in range(2):
                r = env.once(60)
                self.assertEqual(r.returncode, 0, r.stderr.decode())
                ok = [l for l in env.store_lines("jobs") if l.endswith("stdout[site.sh] ok")]
                self.assertEqual(len(ok), 8, (attempt, ok))
                kernel = [l for l in env.store_lines("kmsg") if l == mlx]
                self.assertEqual(len(kernel), 3, (attempt, kernel))
                # The restart forgets where it was: everything is read and sent again.
                os.unlink(d + "/state/shipper-checkpoint.json")
            stats = json.loads(http("GET", env.url + "/-/stats")[1])
            self.assertGreaterEqual(stats["duplicates"], 11)  # re-sent, identical, dropped
        finally:
            env.close()


class Pods(unittest.TestCase):
    """A kubelet-shaped /var/log/pods tree (issue 15): CRI lines with P pieces and stderr between
    them, kubelet's rotation (0.log renamed to 0.log.<time>, the one before gzip'ed) while
    shipping, and SIGKILLs at random moments, some while a line's P pieces wait for their F:
    every line arrives exactly once, joined, with the CRI time and the labels from the path."""

    UIDS = {"slurm-job-4242-worker-0": "0f3c1a2e-5b6d-4e7f-8a9b-0c1d2e3f4a50",
            "slurm-job-4242-worker-1": "0f3c1a2e-5b6d-4e7f-8a9b-0c1d2e3f4a51", "web-1": "77aa"}
    CONTAINERS = [("train", "slurm-job-4242-worker-0", "trainer"), ("train", "slurm-job-4242-worker-1", "trainer"),
                  ("serving", "web-1", "app")]

    def test_rotation_while_shipping_and_kill9_every_line_once(self):
        env = Env()
        try:
            d = env.dir
            root = d + "/pods"
            with_prolog(env, "true", ('    journald: {', '    pods: {enabled: true, root: "%s", nccl_containers: '
                                                            '[trainer]}\n    journald: {' % root))
            # Job 4242 runs on this node without trace capture: its NCCL containers' INFO noise goes.
            p = subprocess.run([os.path.join(BUILD, "prolog/jobtrail-prolog"), "--config", d + "/cfg.yaml"],
                               env=dict(os.environ, SLURM_JOB_ID="4242"), capture_output=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            dirs = {}
            for ns, pod, c in self.CONTAINERS:
                dirs[c, pod] = "%s/%s_%s_%s/%s" % (root, ns, pod, self.UIDS[pod], c)
                os.makedirs(dirs[c, pod])
            expected, noise, rotations = [], [], {}
            t0 = time.time_ns()
            ns_ = [0]

            def stamp():
                ns_[0] += 1000
                t = t0 + ns_[0]
                return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t // 10**9)) + ".%09dZ" % (t % 10**9)

            rnd = random.Random(15)
            n = 0
            env.start()
            for round_ in range(16):
                held = []
                for (c, pod), path in dirs.items():
                    with open(path + "/0.log", "a") as f:
                        for _ in range(400):
                            text = "%s %s line %06d %s" % (pod, c, n, "p" * 30)
                            n += 1
                            if n % 7 == 0:  # a long line in P pieces, stderr written between them
                                f.write("%s stdout P %s\n%s stderr F err %06d\n%s stdout P %s\n%s stdout F %s\n" % (
                                    stamp(), text[:20], stamp(), n, stamp(), text[20:40], stamp(), text[40:]))
                                expected += [text, "err %06d" % n]
                            elif n % 101 == 0:
                                f.write("not a cri line %06d\n" % n)  # shipped as it is
                                expected.append("not a cri line %06d" % n)
                            else:
                                f.write("%s stdout F %s\n" % (stamp(), text))
                                expected.append(text)
                        info = "NCCL INFO Channel 00/02 : 0[0] -> 1[1] via P2P/IPC %06d" % n
                        f.write("%s stdout F %s\n" % (stamp(), info))
                        (noise if c == "trainer" else expected).append(info)
                        if round_ % 3 == 1:  # P pieces left waiting for their F across the kill
                            text = "%s %s held %06d" % (pod, c, round_)
                            f.write("%s stdout P %s\n" % (stamp(), text[:10]))
                            held.append((path, text))
                if round_ % 4 == 3:
                    # kubelet: the previous rotated file is gzip'ed (once shipped: a lag past
                    # kubelet's rotation period loses it, for any shipper), 0.log renamed.
                    for key, path in dirs.items():
                        if key in rotations:
                            old = rotations[key]
                            with open(old, "rb") as src, open(old + ".gz", "wb") as dst:
                                import gzip
                                dst.write(gzip.compress(src.read()))
                            os.unlink(old)
                        rotations[key] = path + "/0.log.%s" % time.strftime("%Y%m%d-%H%M%S", time.gmtime(round_ * 60))
                        os.rename(path + "/0.log", rotations[key])
                time.sleep(rnd.uniform(0.1, 0.5))
                env.kill()  # SIGKILL at a random moment
                for path, text in held:
                    with open(path + "/0.log", "a") as f:
                        f.write("%s stdout F %s\n" % (stamp(), text[10:]))
                    # Rotated between P and F: the old file's end is shipped as it is, the F
                    # as the new file's first line (nothing lost, nothing joined across files).
                    expected += [text[:10], text[10:]] if round_ % 4 == 3 else [text]
                env.start()
                if round_ % 4 == 2:  # what the next rotation compresses must have been read
                    want = set(expected)
                    wait_for_lines(env, "kubernetes-pods", lambda got: want <= set(got), tries=600)
            env.kill()
            r = env.once()
            self.assertEqual(r.returncode, 0, r.stderr.decode()[-2000:])
            got = env.store_lines("kubernetes-pods")
            self.assertGreater(len(expected), 19000)
            self.assertEqual(set(got) - set(expected), set(), "lines never written (a .gz read?)")
            missing = set(expected) - set(got)
            self.assertEqual(missing, set(), "%d lines missing, e.g. %s" % (len(missing), sorted(missing)[:3]))
            self.assertEqual(sorted(got), sorted(expected))
            self.assertFalse(set(noise) & set(got), "NCCL INFO noise of a job without trace capture shipped")
            self.check_streams(env)
        finally:
            env.close()

    def check_streams(self, env):
        doc = json.loads(http("GET", env.url + "/-/store")[1])
        seen = set()
        for s in doc:
            lb = {k: v for k, v in s["labels"].items() if k != "__stream_shard__"}
            if lb["job"] != "kubernetes-pods":
                continue
            pod = lb["pod"]
            want = {"cluster": "e2e", "node": "n1", "job": "kubernetes-pods", "service_name": "kubernetes-pods",
                    "namespace": "train" if pod.startswith("slurm-job") else "serving", "pod": pod,
                    "container": "trainer" if pod.startswith("slurm-job") else "app"}
            if pod.startswith("slurm-job-4242"):
                want["job_id"] = "4242"
            self.assertEqual(lb, want)  # never the uid as a label
            seen.add(pod)
            cri_lines = []
            for ts, line, sm in s["entries"]:
                self.assertEqual(sm.get("pod_uid"), self.UIDS[pod], line)
                if not line.startswith("not a cri line"):
                    self.assertIn(sm.get("stream"), ("stdout", "stderr"), line)
                m = re.fullmatch(r"\S+ \S+ line (\d+) p+", line)
                if m:
                    cri_lines.append((int(ts), int(m.group(1))))
            self.assertGreater(len(cri_lines), 1000)
            nums = [k for _, k in sorted(cri_lines)]
            self.assertEqual(nums, sorted(nums), "%s: CRI times out of order" % pod)
        self.assertEqual(seen, set(self.UIDS))


class CheckConfig(unittest.TestCase):
    """--check-config is what an operator runs after an edit: each value that would fail later
    (a label Loki refuses, a port that is none, an overflowing timeout) fails it now, naming
    file:line and key."""

    def check(self, yaml):
        d = tempfile.mkdtemp(prefix="jobtrail-check-")
        try:
            path = d + "/jobtrail.yaml"
            with open(path, "w") as f:
                f.write(yaml)
            r = subprocess.run([SHIPPER, "--check-config", "--config", path], capture_output=True, timeout=30)
            return r.returncode, r.stderr.decode(), path
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_each_bad_value_fails_with_file_line_and_key(self):
        rc, err, path = self.check("""shipper:
  metrics: "127.0.0.1:notaport"
  spool: {max_size: 1}
  sources:
    files:
      - {paths: [/var/log/a.log], job: a, labels: {bad-name: x, node: other}}
      - {paths: [/var/log/b.log], job: b, max_files_per_owner: 0, max_open_files: 0, idle_close: 1ms, max_partial_bytes: 1}
  stages:
    drop:
      - {name: broken, pattern: "(unclosed"}
    nccl_budget: {bytes: 1KiB, window: 2h}
  batch: {max_in_flight: 0}
collector:
  prolog:
    total_timeout: 106752d
""")
        self.assertNotEqual(rc, 0, err)
        for line, key in [(2, "shipper.metrics"), (3, "shipper.spool.max_size"),
                          (6, "shipper.sources.files[0].labels.bad-name"),
                          (6, "shipper.sources.files[0].labels.node"),
                          (7, "shipper.sources.files[1].max_files_per_owner"),
                          (7, "shipper.sources.files[1].max_open_files"),
                          (7, "shipper.sources.files[1].idle_close"),
                          (7, "shipper.sources.files[1].max_partial_bytes"),
                          (10, "shipper.stages.drop[0].pattern"), (11, "shipper.stages.nccl_budget.bytes"),
                          (11, "shipper.stages.nccl_budget.window"), (12, "shipper.batch.max_in_flight"),
                          (15, "collector.prolog.total_timeout")]:
            self.assertRegex(err, r"%s:%d:\d+: key '%s'" % (re.escape(path), line, re.escape(key)), err)
        self.assertIn("missing )", err)  # RE2's reason

    def test_documented_off_values_pass(self):
        rc, err, _ = self.check('shipper:\n  metrics: ""\n  heartbeat: 0\n  stages: {nccl_budget: {bytes: 0}}\n')
        self.assertEqual(rc, 0, err)


if __name__ == "__main__":
    skips.main()
