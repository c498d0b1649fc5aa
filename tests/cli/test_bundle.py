#!/usr/bin/python3
"""`jobtrail bundle`, `xid` and `logql` against the Loki test double, and `bundle --local` on job
log files: what an operator gets in the archive. Needs JOBTRAIL_BUILD (the build directory);
the LogQL and browser checks need tests/js/node_modules (scripts/install-deps.sh) and chromium."""
import glob, hashlib, json, os, shutil, subprocess, tarfile, tempfile, time, unittest, urllib.request

BUILD = os.environ.get("JOBTRAIL_BUILD", os.path.join(os.path.dirname(__file__), "../../build"))
SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
JOBTRAIL = os.path.join(BUILD, "cli/jobtrail")
JS = os.path.join(SRC, "tests/js")
ARTIFACTS = os.path.join(BUILD, "test-artifacts")
HAVE_JS = os.path.isdir(os.path.join(JS, "node_modules/@grafana/lezer-logql"))
HAVE_CHROMIUM = HAVE_JS and os.access("/usr/bin/chromium", os.X_OK)
NS = 1_000_000_000
XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."


def http(method, url, body=None):
    req = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Loki:
    def __init__(self, *args):
        self.dir = tempfile.mkdtemp(prefix="jobtrail-cli-")
        pf = self.dir + "/port"
        self.proc = subprocess.Popen(["/usr/bin/python3", SRC + "/tests/loki_double/loki_double.py", "--port-file", pf,
                                      "--ingestion-rate-mb", "1000", "--burst-mb", "1000", "--per-stream-rate-mb",
                                      "1000", "--per-stream-burst-mb", "1000"] + list(args), stdout=subprocess.DEVNULL)
        for _ in range(300):
            if os.path.exists(pf):
                break
            time.sleep(0.02)
        with open(pf) as f:
            self.url = "http://127.0.0.1:" + f.read()

    def push(self, streams):
        for i in range(0, len(streams), 1):
            s = streams[i]
            for k in range(0, len(s["values"]), 5000):
                st, body = http("POST", self.url + "/loki/api/v1/push",
                                json.dumps({"streams": [{"stream": s["stream"], "values": s["values"][k:k + 5000]}]}).encode())
                assert st == 204, body

    def close(self):
        self.proc.terminate()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def job_streams(job="4242", nodes=("gpu01", "gpu02"), nccl_lines=3000, t0=None):
    """What the shipper would have sent for a two-node job whose gpu02 lost a GPU (Xid 79)."""
    t0 = t0 or time.time_ns() - 3600 * NS
    base = {"cluster": "c1"}
    out = []
    for n in nodes:
        lab = dict(base, node=n)
        out.append({"stream": dict(lab, job="slurm-prolog-epilog", job_id=job, service_name="slurm-prolog-epilog", phase="prolog", tag="meta"),
                    "values": [[str(t0), "prolog meta user=alice"], [str(t0 + 1), "prolog meta partition=gpu"]]})
        out.append({"stream": dict(lab, job="slurm-prolog-epilog", job_id=job, service_name="slurm-prolog-epilog", phase="prolog", tag="status"),
                    "values": [[str(t0 + 2 * NS), 'prolog status[10-gpu-check.sh] status=0 duration_ms=12 result="exit 0"']]})
        status = "1" if n == "gpu02" else "0"
        out.append({"stream": dict(lab, job="slurm-prolog-epilog", job_id=job, service_name="slurm-prolog-epilog", phase="epilog", tag="status"),
                    "values": [[str(t0 + 600 * NS), 'epilog status[50-health.sh] status=%s duration_ms=40 result="exit %s"' % (status, status)]]})
        out.append({"stream": dict(lab, job="slurm-prolog-epilog", job_id=job, service_name="slurm-prolog-epilog", phase="epilog", tag="end"),
                    "values": [[str(t0 + 601 * NS), "epilog end status=%s duration_ms=55" % status]]})
        for rank in range(2):
            f = "0.%s.%d.log" % (n, 1000 + rank)
            vals = [[str(t0 + 10 * NS + i * 1000 + rank), "[t] %s:%d:%d [%d] NCCL INFO Channel %02d/32 seq %06d" % (n, 1000 + rank, 1000 + rank, rank, i % 32, i)]
                    for i in range(nccl_lines)]
            if n == "gpu01":
                vals.append([str(t0 + 400 * NS + rank), "[t] %s:%d:%d [%d] NCCL WARN NET/IB : Got completion from peer gpu02 with status=12" % (n, 1000 + rank, 1000 + rank, rank)])
            out.append({"stream": dict(lab, job="nccl", job_id=job, service_name="nccl", file=f, step="0", pid=str(1000 + rank)), "values": vals})
        kvals = [[str(t0 - 300 * NS), "eth0: link up"], [str(t0 + 300 * NS), "usb 1-1: new device"]]
        if n == "gpu02":
            kvals.append([str(t0 + 380 * NS), XID79])
        out.append({"stream": dict(lab, job="kmsg", priority="warning", service_name="kmsg"), "values": sorted(kvals)})
        out.append({"stream": dict(lab, job="systemd-journal", unit="slurmd.service", priority="info", service_name="slurmd"),
                    "values": [[str(t0 - NS), "launch task StepId=%s.0 request from UID:1000" % job],
                               [str(t0 + 50 * NS), "something about job 99999"]]})
        out.append({"stream": dict(lab, job="fabric-manager", service_name="fabric-manager"),
                    "values": [[str(t0 + 5 * NS), "[INFO] fabric manager ok"]]})
    return out


def extract(archive, into):
    os.makedirs(into, exist_ok=True)
    subprocess.run(["tar", "--zstd", "-xf", archive, "-C", into], check=True)
    (top,) = os.listdir(into)
    return os.path.join(into, top)


class Bundle(unittest.TestCase):
    def setUp(self):
        self.out = tempfile.mkdtemp(prefix="jobtrail-bundle-")
        os.makedirs(ARTIFACTS, exist_ok=True)

    def tearDown(self):
        shutil.rmtree(self.out, ignore_errors=True)

    def run_cli(self, *args, config="/dev/null"):
        return subprocess.run([JOBTRAIL, "--config", config] + list(args), capture_output=True, text=True, timeout=300)

    def test_bundle_pages_past_the_entry_limit_and_says_what_broke(self):
        loki = Loki("--max-entries-limit", "1000")  # 12,000 NCCL lines: many pages per query
        try:
            loki.push(job_streams())
            r = self.run_cli("--loki-url", loki.url, "bundle", "4242", "-o", self.out)
            self.assertEqual(r.returncode, 0, r.stderr)
            (archive,) = glob.glob(self.out + "/c1-job4242-*.tar.zst") or glob.glob(self.out + "/*-job4242-*.tar.zst")
            with open(archive + ".sha256") as f:
                want, name = f.read().split()
            self.assertEqual(name, os.path.basename(archive))
            self.assertEqual(want, hashlib.sha256(open(archive, "rb").read()).hexdigest())
            top = extract(archive, self.out + "/x")

            # Every NCCL line once: none missing at page boundaries, none twice.
            for n in ("gpu01", "gpu02"):
                for rank in range(2):
                    with open("%s/nccl/%s/0.%s.%d.log" % (top, n, n, 1000 + rank)) as f:
                        lines = f.read().splitlines()
                    seqs = [l.split(" seq ")[1] for l in lines if " seq " in l]
                    self.assertEqual(seqs, ["%06d" % i for i in range(3000)])
            with open(top + "/nodes/gpu02/kmsg.log") as f:
                self.assertIn(XID79, f.read())
            with open(top + "/nodes/gpu01/slurmd.log") as f:
                slurmd = f.read()
            self.assertIn("StepId=4242.0", slurmd)
            self.assertNotIn("99999", slurmd)  # only lines about this job

            summary = open(top + "/summary.txt").read()
            cause = summary.split("MOST LIKELY CAUSE")[1].split("BY NODE")[0]
            self.assertIn("gpu02", cause)
            self.assertIn("Xid 79", cause)
            self.assertIn("reboot", cause)  # the catalogue's action
            self.assertIn("NCCL WARN", summary)
            self.assertIn("(x2)", summary)  # two ranks warned on gpu01
            self.assertIn("epilog script 50-health.sh failed", summary)
            self.assertIn("user:      alice", summary)
            self.assertEqual(r.stdout.split("bundle:")[0].strip(), summary.strip())  # printed too

            m = json.load(open(top + "/manifest.json"))
            self.assertTrue(m["complete"])
            self.assertEqual(sorted(m["job"]["nodes"]), ["gpu01", "gpu02"])
            self.assertEqual(m["job"]["basis"], "prolog/epilog records in Loki")
            by_name = {q["name"]: q for q in m["queries"]}
            self.assertEqual(by_name["NCCL gpu01"]["lines"], 6_002)
            self.assertEqual(by_name["NCCL gpu02"]["lines"], 6_000)
            self.assertTrue(all(not q["failed"] and not q["truncated"] for q in m["queries"]))
            for f in m["files"]:
                with open(os.path.join(top, f["path"]), "rb") as fh:
                    self.assertEqual(hashlib.sha256(fh.read()).hexdigest(), f["sha256"], f["path"])
            # The timeline is every record once, in time order.
            with open(top + "/timeline.txt") as f:
                tl = f.read().splitlines()
            self.assertEqual(len(tl), sum(q["lines"] for q in m["queries"] if q["name"] != "find the job"))
            self.assertEqual([l[:30] for l in tl], sorted(l[:30] for l in tl))

            if HAVE_CHROMIUM:
                png = os.path.join(ARTIFACTS, "report.png")
                rr = subprocess.run(["node", JS + "/render-report.mjs", top + "/report.html", png],
                                    capture_output=True, text=True, timeout=120)
                self.assertEqual(rr.returncode, 0, rr.stderr)
                seen = json.loads(rr.stdout.strip().splitlines()[-1])
                self.assertEqual(seen["problems"], [])
                self.assertGreaterEqual(seen["marks"], 3)  # Xid, NCCL WARN, epilog failure
                self.assertIn("Xid 79", seen["cause"])
                self.assertGreater(os.path.getsize(png), 10_000)
            if HAVE_JS:
                self.check_logql([q["query"] for q in m["queries"]])
        finally:
            loki.close()

    def test_a_failing_query_gives_a_partial_bundle_that_says_so(self):
        loki = Loki()
        try:
            loki.push(job_streams(nccl_lines=10))
            http("POST", loki.url + "/-/fault",
                 json.dumps({"mode": "status", "status": 500, "body": "rpc error: code = Unavailable\n",
                             "target": "query", "query_contains": "fabric-manager"}).encode())
            # Credentials in the URL are used, and never written into the bundle.
            url = loki.url.replace("http://", "http://ops:s3cret@")
            r = self.run_cli("--loki-url", url, "bundle", "4242", "-o", self.out)
            self.assertEqual(r.returncode, 3, r.stderr)  # partial
            self.assertIn("partial", r.stderr)
            (archive,) = glob.glob(self.out + "/*.tar.zst")
            top = extract(archive, self.out + "/x")
            m = json.load(open(top + "/manifest.json"))
            self.assertFalse(m["complete"])
            failed = [q for q in m["queries"] if q["failed"]]
            self.assertEqual(sorted(q["name"] for q in failed), ["fabric manager gpu01", "fabric manager gpu02"])
            self.assertIn("HTTP 500", failed[0]["error"])
            self.assertIn("Xid 79", open(top + "/summary.txt").read())  # the rest is there
            for root, _, files in os.walk(top):
                for fn in files:
                    self.assertNotIn(b"s3cret", open(os.path.join(root, fn), "rb").read(), fn)
        finally:
            loki.close()

    def test_unknown_job_is_not_found_and_writes_nothing(self):
        loki = Loki()
        try:
            loki.push(job_streams(nccl_lines=1))
            r = self.run_cli("--loki-url", loki.url, "bundle", "777", "-o", self.out)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("no prolog/epilog records", r.stderr)
            self.assertEqual(os.listdir(self.out), [])
        finally:
            loki.close()

    def test_loki_down_is_not_reported_as_not_found(self):
        r = self.run_cli("--loki-url", "http://127.0.0.1:9", "bundle", "4242", "-o", self.out)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("cannot reach Loki", r.stderr)

    def test_local_bundle_from_job_logs_without_loki(self):
        logs = self.out + "/logs"
        os.makedirs(logs + "/prolog")
        os.makedirs(logs + "/epilog")
        os.makedirs(logs + "/nccl/4242")
        t = "2026-11-29T21:52:%02d.000000000Z"
        with open(logs + "/prolog/4242.log", "w") as f:
            f.write(t % 1 + " meta node=gpu07\n" + t % 1 + " meta user=bob\n" +
                    t % 1 + " kmsg-context 6,100,1000,-;eth0: link up\n" +
                    t % 2 + ' status[10-check.sh] status=0 duration_ms=3 result="exit 0"\n')
        with open(logs + "/epilog/4242.log", "w") as f:
            f.write(t % 30 + " kmsg 4,200,2000,-;" + XID79.replace("'", "\\x27") + "\n" +
                    t % 31 + " end status=0 duration_ms=9\n")
        with open(logs + "/nccl/4242/0.gpu07.55.log", "w") as f:
            f.write("[2026-11-29T21:52:20.000000+0000] gpu07:55:55 [0] NCCL WARN Cuda failure 'unspecified launch failure'\n")
        with open(self.out + "/cfg.yaml", "w") as f:
            f.write("cluster: lab\ncollector: {log_dir: %s}\n" % logs)
        # No Loki configured at all: local is the default, and says so.
        r = self.run_cli("bundle", "4242", "-o", self.out, config=self.out + "/cfg.yaml")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("as with --local", r.stderr)
        (archive,) = glob.glob(self.out + "/lab-job4242-*.tar.zst")
        top = extract(archive, self.out + "/x")
        s = open(top + "/summary.txt").read()
        self.assertIn("gpu07", s)
        self.assertIn("Xid 79", s)
        self.assertIn("NCCL WARN", s)
        self.assertIn("eth0: link up", open(top + "/nodes/gpu07/kmsg.log").read())
        m = json.load(open(top + "/manifest.json"))
        self.assertTrue(m["source"].startswith("local"))
        self.assertEqual(m["window"]["start"][:19], "2026-11-29T21:42:01")  # 10 minutes' margin
        # An unknown job locally: not found.
        r = self.run_cli("bundle", "999", "--local", "-o", self.out, config=self.out + "/cfg.yaml")
        self.assertEqual(r.returncode, 1)

    def check_logql(self, queries):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(queries, f)
        try:
            r = subprocess.run(["node", JS + "/check-logql.mjs", f.name], capture_output=True, text=True, timeout=60)
            bad = [q for q in json.loads(r.stdout) if not q["ok"]]
            self.assertEqual(bad, [], "LogQL that Grafana's grammar rejects")
            return json.loads(r.stdout)
        finally:
            os.unlink(f.name)


class OtherCommands(unittest.TestCase):
    def test_logql_prints_queries_grafana_parses(self):
        r = subprocess.run([JOBTRAIL, "--config", "/dev/null", "--json", "logql", "4242", "--nodes", "gpu01,gpu[02]"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        qs = json.loads(r.stdout)
        self.assertTrue(any("slurm_job_id" in q["logql"] for q in qs))
        self.assertTrue(any('node=~"gpu01|gpu\\\\[02\\\\]"' in q["logql"] for q in qs))  # regex-quoted node
        if not HAVE_JS:
            self.skipTest("tests/js/node_modules missing")
        checked = Bundle.check_logql(self, qs)
        used = {l for q in checked for l in q["labels"]}
        # Only labels (and metadata) the shipper produces.
        self.assertLessEqual(used, {"job", "job_id", "node", "unit", "slurm_job_id", "cluster", "priority"})

    def test_xid_table_across_the_fleet(self):
        loki = Loki()
        try:
            loki.push(job_streams(nccl_lines=1, t0=time.time_ns() - 600 * NS))
            r = subprocess.run([JOBTRAIL, "--config", "/dev/null", "--loki-url", loki.url, "--json", "xid", "--since", "2h"],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            rows = json.loads(r.stdout)
            self.assertEqual([(x["node"], x["xid"], x["count"]) for x in rows], [("gpu02", 79, 1)])
            self.assertIn("reboot", rows[0]["action"])
            r = subprocess.run([JOBTRAIL, "--config", "/dev/null", "--loki-url", loki.url, "xid", "--since", "2h",
                                "--nodes", "gpu01"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1)  # nothing on gpu01
        finally:
            loki.close()

    def test_usage_errors_exit_2_and_help_works(self):
        self.assertEqual(subprocess.run([JOBTRAIL, "bundle"], capture_output=True).returncode, 2)
        self.assertEqual(subprocess.run([JOBTRAIL, "bundle", "1", "--margin", "soon"], capture_output=True).returncode, 2)
        for cmd in ([], ["bundle"], ["xid"], ["logql"]):
            r = subprocess.run([JOBTRAIL] + cmd + ["--help"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0)
            self.assertIn("Usage", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
