#!/usr/bin/python3
"""`jobtrail bundle`, `xid` and `logql` against the Loki test double, and `bundle --local` on job
log files: what an operator gets in the archive. Needs JOBTRAIL_BUILD (the build directory);
the LogQL and browser checks need tests/js/node_modules (scripts/install-deps.sh) and chromium."""
import glob, hashlib, json, os, shutil, stat, subprocess, sys, tarfile, tempfile, time, unittest, urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
import skips  # noqa: E402
from jtsupport import BUILD, JOBTRAIL, JSON, SRC, LokiDouble, http  # noqa: E402

JS = os.path.join(SRC, "tests/js")
ARTIFACTS = os.path.join(BUILD, "test-artifacts")
HAVE_JS = os.path.isdir(os.path.join(JS, "node_modules/@grafana/lezer-logql"))
HAVE_CHROMIUM = HAVE_JS and os.access("/usr/bin/chromium", os.X_OK)
NS = 1_000_000_000
XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."


class Loki(LokiDouble):
    """The double with limits no test here reaches, and pushes of what the shipper would send."""

    def __init__(self, *args):
        super().__init__("--ingestion-rate-mb", "1000", "--burst-mb", "1000", "--per-stream-rate-mb", "1000",
                         "--per-stream-burst-mb", "1000", *args)

    def push(self, streams):
        for i in range(0, len(streams), 1):
            s = streams[i]
            for k in range(0, len(s["values"]), 5000):
                st, body = http("POST", self.url + "/loki/api/v1/push",
                                json.dumps({"streams": [{"stream": s["stream"], "values": s["values"][k:k + 5000]}]}).encode(),
                                JSON)
                assert st == 204, body


def job_streams(job="4242", nodes=("gpu01", "gpu02"), nccl_lines=3000, t0=None, cluster="c1", xid_on="gpu02"):
    """What the shipper would have sent for a two-node job whose gpu02 lost a GPU (Xid 79)."""
    t0 = t0 or time.time_ns() - 3600 * NS
    base = {"cluster": cluster}
    out = []
    for n in nodes:
        lab = dict(base, node=n)
        out.append({"stream": dict(lab, job="slurm-prolog-epilog", job_id=job, service_name="slurm-prolog-epilog", phase="prolog", tag="meta"),
                    "values": [[str(t0), "prolog meta user=alice"], [str(t0 + 1), "prolog meta partition=gpu"]]})
        out.append({"stream": dict(lab, job="slurm-prolog-epilog", job_id=job, service_name="slurm-prolog-epilog", phase="prolog", tag="status"),
                    "values": [[str(t0 + 2 * NS), 'prolog status[10-gpu-check.sh] status=0 duration_ms=12 result="exit 0"']]})
        status = "1" if n == xid_on else "0"
        out.append({"stream": dict(lab, job="slurm-prolog-epilog", job_id=job, service_name="slurm-prolog-epilog", phase="epilog", tag="status"),
                    "values": [[str(t0 + 600 * NS), 'epilog status[50-health.sh] status=%s duration_ms=40 result="exit %s"' % (status, status)]]})
        out.append({"stream": dict(lab, job="slurm-prolog-epilog", job_id=job, service_name="slurm-prolog-epilog", phase="epilog", tag="end"),
                    "values": [[str(t0 + 601 * NS), "epilog end status=%s duration_ms=55" % status]]})
        for rank in range(2):
            f = "0.%s.%d.log" % (n, 1000 + rank)
            vals = [[str(t0 + 10 * NS + i * 1000 + rank), "[t] %s:%d:%d [%d] NCCL INFO Channel %02d/32 seq %06d" % (n, 1000 + rank, 1000 + rank, rank, i % 32, i)]
                    for i in range(nccl_lines)]
            if n == nodes[0]:
                vals.append([str(t0 + 400 * NS + rank), "[t] %s:%d:%d [%d] NCCL WARN NET/IB : Got completion from peer gpu02 with status=12" % (n, 1000 + rank, 1000 + rank, rank)])
            out.append({"stream": dict(lab, job="nccl", job_id=job, service_name="nccl", file=f), "values": vals})
        kvals = [[str(t0 - 300 * NS), "eth0: link up"], [str(t0 + 300 * NS), "usb 1-1: new device"]]
        if n == xid_on:
            kvals.append([str(t0 + 380 * NS), XID79])
        out.append({"stream": dict(lab, job="kmsg", priority="warning", service_name="kmsg"), "values": sorted(kvals)})
        out.append({"stream": dict(lab, job="systemd-journal", unit="slurmd.service", priority="info", service_name="slurmd"),
                    "values": [[str(t0 - NS), "launch task StepId=%s.0 request from UID:1000" % job],
                               [str(t0 + 50 * NS), "something about job 99999"]]})
        out.append({"stream": dict(lab, job="fabric-manager", service_name="fabric-manager"),
                    "values": [[str(t0 + 5 * NS), "[INFO] fabric manager ok"]]})
    return out


def tar_members(archive):
    """Member names and contents as written, read with python's tarfile (not extracted)."""
    raw = subprocess.run(["zstd", "-dc", archive], capture_output=True, check=True).stdout
    import io
    with tarfile.open(fileobj=io.BytesIO(raw)) as t:
        return {m.name: (t.extractfile(m).read() if m.isfile() else None) for m in t.getmembers()}


def clean_member(name):
    parts = name.split("/")
    return (not name.startswith("/") and all(p not in ("", ".", "..") for p in parts)
            and all(0x20 < ord(c) < 0x7f and c != "\\" for c in name))


def everything_under(root):
    out = set()
    for d, dirs, files in os.walk(root):
        out.update(os.path.join(d, x) for x in dirs + files)
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

    def run_cli(self, *args, config="/dev/null", timeout=300):
        return subprocess.run([JOBTRAIL, "--config", config] + list(args), capture_output=True, text=True,
                              timeout=timeout)

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

            if not HAVE_CHROMIUM:
                skips.partly(self, "report.html not rendered: needs tests/js/node_modules and /usr/bin/chromium")
            else:
                png = os.path.join(ARTIFACTS, "report.png")
                rr = subprocess.run(["node", JS + "/render-report.mjs", top + "/report.html", png],
                                    capture_output=True, text=True, timeout=120)
                self.assertEqual(rr.returncode, 0, rr.stderr)
                seen = json.loads(rr.stdout.strip().splitlines()[-1])
                self.assertEqual(seen["problems"], [])
                self.assertGreaterEqual(seen["marks"], 3)  # Xid, NCCL WARN, epilog failure
                self.assertIn("Xid 79", seen["cause"])
                self.assertGreater(os.path.getsize(png), 10_000)
            if not HAVE_JS:
                skips.partly(self, "LogQL not checked: Grafana's grammar missing (npm ci in tests/js)")
            else:
                self.check_logql([q["query"] for q in m["queries"]])
        finally:
            loki.close()

    def test_nccl_files_named_back_from_the_step_on_each_files_first_line(self):
        """As the shipper sends them: one stream per job and node, the step only on the first line
        of each file (the lines say host:pid). Many pages; a pid used again by a later step; a
        line stamped before its file's first line; lines of one microsecond; a first line that
        does not say host:pid (it names its file); lines from a shipper that said the step on
        every line; a process whose first line never reached
        Loki is kept apart as unknown, not mixed in; a step that could not name a file is not
        believed."""
        loki = Loki("--max-entries-limit", "100")
        try:
            t0 = time.time_ns() - 3600 * NS
            loki.push([s for s in job_streams(nccl_lines=0, t0=t0) if s["stream"]["job"] != "nccl"])
            lab = {"cluster": "c1", "node": "gpu01", "job": "nccl", "job_id": "4242", "service_name": "nccl"}
            want, vals = {}, []

            def add(f, ts, line, md=None):
                vals.append([str(ts), line] + ([md] if md else []))
                want.setdefault(f, []).append((ts, line))
            for step, pid, at in (("0", 2000, 20), ("0", 2001, 21), ("1", 2000, 200)):
                f = "%s.gpu01.%d.log" % (step, pid)
                for i in range(300):
                    add(f, t0 + at * NS + i * 1000, "[t] gpu01:%d:%d [0] NCCL INFO %s line %d" % (pid, pid, f, i),
                        {"step": step} if i == 0 else None)
            # Stamped before the first line of its file (a backlog read late, the user's own stamp).
            add("0.gpu01.2000.log", t0 + 19 * NS, "[t] gpu01:2000:2000 [0] NCCL WARN before the first line")
            # Three lines of one microsecond: the one that says the step is not the first back.
            for i, md in enumerate((None, {"step": "0"}, None)):
                add("0.gpu01.2003.log", t0 + 22 * NS, "[t] gpu01:2003:2003 [0] NCCL INFO same time %d" % i, md)
            # The first line does not say host:pid, so it carries its file's name as well.
            add("0.gpu01.2004.log", t0 + 23 * NS, "the user's own first line", {"file": "0.gpu01.2004.log", "step": "0"})
            add("0.gpu01.2004.log", t0 + 23 * NS + 1, "[t] gpu01:2004:2004 [0] NCCL WARN after it")
            # From a shipper that said the step on every line.
            for i in range(3):
                add("2.gpu01.2006.log", t0 + 25 * NS + i, "[t] gpu01:2006:2006 [0] NCCL INFO old %d" % i, {"step": "2"})
            # A step that could not be a file's name is not believed.
            add("unknown.gpu01.2005.log", t0 + 24 * NS, "[t] gpu01:2005:2005 [0] NCCL INFO x", {"step": "../x"})
            add("unknown.gpu01.2002.log", t0 + 30 * NS, "[t] gpu01:2002:2002 [0] NCCL WARN first line lost")
            vals.sort(key=lambda v: int(v[0]))
            st, body = http("POST", loki.url + "/loki/api/v1/push",
                            json.dumps({"streams": [{"stream": lab, "values": vals}]}).encode(), JSON)
            self.assertEqual(st, 204, body)
            r = self.run_cli("--loki-url", loki.url, "bundle", "4242", "-o", self.out)
            self.assertEqual(r.returncode, 0, r.stderr)
            (archive,) = glob.glob(self.out + "/*-job4242-*.tar.zst")
            top = extract(archive, self.out + "/x")
            self.assertEqual(sorted(os.listdir(top + "/nccl/gpu01")), sorted(want))

            def lines_of(f):
                with open(top + "/nccl/gpu01/" + f) as fh:
                    return [l.split(" ", 1)[1] for l in fh.read().splitlines()]
            for f, entries in want.items():
                self.assertEqual(sorted(lines_of(f)), sorted(line for _, line in entries), f)
                self.assertEqual(lines_of(f)[0], min(entries)[1], f)  # in time order
        finally:
            loki.close()

    def test_a_window_given_after_a_process_said_its_step_still_names_its_file_by_step(self):
        """Issue 29: the shipper says a process's step on its first line and again once ten
        minutes of its lines have passed. A window given (--start, a margin of 1 s) that starts
        after the last time it was said, before the next: its lines are still 0.gpu01.3000.log,
        not unknown.gpu01.3000.log."""
        loki = Loki()
        try:
            t0 = time.time_ns() - 2 * 3600 * NS
            job = {"cluster": "c1", "node": "gpu01", "job": "slurm-prolog-epilog", "job_id": "4242"}
            loki.push([{"stream": dict(job, phase="prolog"), "values": [[str(t0), "prolog meta user=alice"]]},
                       {"stream": dict(job, phase="epilog"),
                        "values": [[str(t0 + 1800 * NS), "epilog end status=0 duration_ms=5"]]}])
            vals = []
            for i in range(15):  # a line a minute from t0+20s; the step said at +20s and +10m20s
                md = {"step": "0"} if i in (0, 10) else None
                vals.append([str(t0 + (20 + 60 * i) * NS), "[t] gpu01:3000:3000 [0] NCCL WARN line %d" % i] +
                            ([md] if md else []))
            loki.push([{"stream": {"cluster": "c1", "node": "gpu01", "job": "nccl", "job_id": "4242"}, "values": vals}])
            start = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime((t0 + 13 * 60 * NS) // NS))
            r = self.run_cli("--loki-url", loki.url, "bundle", "4242", "--start", start, "--margin", "1s",
                             "-o", self.out)
            self.assertEqual(r.returncode, 0, r.stderr)
            (archive,) = glob.glob(self.out + "/*-job4242-*.tar.zst")
            top = extract(archive, self.out + "/x")
            self.assertEqual(os.listdir(top + "/nccl/gpu01"), ["0.gpu01.3000.log"])
            with open(top + "/nccl/gpu01/0.gpu01.3000.log") as f:
                self.assertEqual([l.rsplit(" ", 1)[1] for l in f.read().splitlines()], ["13", "14"])
        finally:
            loki.close()

    def test_a_sharded_nccl_stream_is_one_file_with_every_line_once_in_order(self):
        """A job at NCCL TRACE: one rank's stream comes faster than Loki's shard_streams
        desired_rate (1536KB/s), and Loki (as the double) stores it as __stream_shard__="0".."N"
        streams beside the unsharded one; a batch is sent again overlapping (as after a push Loki
        stored but never answered), and its lines land in other shards, where they are new. The
        bundle has the rank's file once, each line once, in order; the label is no file, no source."""
        loki = Loki()
        try:
            t0 = time.time_ns() - 3600 * NS
            loki.push(job_streams(nccl_lines=10, t0=t0))
            f = "0.gpu02.3000.log"
            lab = {"cluster": "c1", "node": "gpu02", "job": "nccl", "job_id": "4242", "service_name": "nccl",
                   "file": f}
            lines = ["[t] gpu02:3000:3000 [3] NCCL TRACE Channel %02d/32 seq %06d %s" % (i % 32, i, "p" * 42)
                     for i in range(60000)]

            def push(lo, hi):
                vals = [[str(t0 + 20 * NS + i * 1000), lines[i]] for i in range(lo, hi)]
                st, body = http("POST", loki.url + "/loki/api/v1/push",
                                json.dumps({"streams": [{"stream": lab, "values": vals}]}).encode(), JSON)
                self.assertEqual(st, 204, body)

            def sharded():
                series = json.loads(http("GET", loki.url + "/loki/api/v1/series?match[]=" +
                                         urllib.parse.quote('{file="%s"}' % f))[1])["data"]
                return len([s for s in series if "__stream_shard__" in s]) > 1

            # 1 MB pushes: the first one before Loki knows the stream's rate, a pause for its
            # ingester to publish the second and its rate store to poll it, then back to back.
            again = None
            for lo in range(0, 60000, 10000):
                push(lo, lo + 10000)
                if lo == 0:
                    time.sleep(1.2)
                elif again is None and sharded():
                    # This batch again, batched anew (one line later: entry by entry round robin
                    # puts its lines in other shards, where they are new).
                    again = lo
                    push(lo + 1, lo + 10000)
            self.assertIsNotNone(again, "never sharded")
            store = json.loads(http("GET", loki.url + "/-/store")[1])
            held = sum(len(s["entries"]) for s in store if s["labels"].get("file") == f)
            self.assertGreater(held, 60000)  # some lines twice, in two shards

            r = self.run_cli("--loki-url", loki.url, "bundle", "4242", "-o", self.out)
            self.assertEqual(r.returncode, 0, r.stderr)
            (archive,) = glob.glob(self.out + "/*-job4242-*.tar.zst")
            members = tar_members(archive)
            self.assertFalse([m for m in members if "shard" in m], sorted(members))
            top = extract(archive, self.out + "/x")
            self.assertEqual(sorted(os.listdir(top + "/nccl/gpu02")), ["0.gpu02.1000.log", "0.gpu02.1001.log", f])
            got = [l.split(" ", 1)[1] for l in open(top + "/nccl/gpu02/" + f).read().splitlines()]
            self.assertEqual(len(got), 60000)
            self.assertEqual(got, lines)  # each once, in order
            m = json.load(open(top + "/manifest.json"))
            by_name = {q["name"]: q for q in m["queries"]}
            self.assertEqual(by_name["NCCL gpu02"]["lines"], 60000 + 2 * 10)
            self.assertTrue(m["complete"])
            with open(top + "/timeline.txt") as fh:
                tl = fh.read().splitlines()
            self.assertEqual(len(tl), sum(q["lines"] for q in m["queries"] if q["name"] != "find the job"))
            traced = [l for l in tl if "NCCL TRACE" in l]
            self.assertEqual(traced, ["%s gpu02 nccl %s" % (l[:30], line) for l, line in
                                      zip(open(top + "/nccl/gpu02/" + f).read().splitlines(), lines)])
            self.assertEqual({l.split(" ")[2] for l in tl},
                             {"prolog", "epilog", "nccl", "kmsg", "slurmd", "fabric-manager"})
        finally:
            loki.close()

    def test_a_45_day_window_bundles_the_jobs_latest_run_and_keeps_an_earlier_jobs_xid_out(self):
        """Job ids come round again (a reset Slurm): job 4242 ran 20 days ago and lost a GPU on
        gpu02, and again an hour ago, losing one again. `--start 45d` covers both: the bundle is
        of the latest run, its Xid the cause, once; the earlier job is not merged in."""
        loki = Loki("--reject-old-samples-max-age", str(60 * 86400))
        try:
            t_old, t0 = time.time_ns() - 20 * 86400 * NS, time.time_ns() - 3600 * NS
            loki.push(job_streams(nccl_lines=5, t0=t_old))
            loki.push(job_streams(nccl_lines=5, t0=t0))
            r = self.run_cli("--loki-url", loki.url, "bundle", "4242", "--start", "45d", "-o", self.out)
            self.assertEqual(r.returncode, 0, r.stderr)
            (archive,) = glob.glob(self.out + "/*-job4242-*.tar.zst")
            top = extract(archive, self.out + "/x")
            summary = open(top + "/summary.txt").read()
            cause = summary.split("MOST LIKELY CAUSE")[1].split("BY NODE")[0]
            xid_at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((t0 + 380 * NS) // NS))
            self.assertIn(xid_at, cause)
            self.assertIn("Xid 79", cause)
            by_node = summary.split("BY NODE")[1]
            xids = [l for l in by_node.splitlines() if "Xid 79" in l]
            self.assertEqual(len(xids), 1, by_node)
            self.assertNotIn("(x2)", xids[0])
            m = json.load(open(top + "/manifest.json"))
            old_day = time.strftime("%Y-%m-%d", time.gmtime(t_old // NS))
            self.assertNotIn(old_day, open(top + "/timeline.txt").read())
            self.assertGreater(m["window"]["start"], time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((t0 - 11 * 60 * NS) // NS)))
        finally:
            loki.close()

    def test_an_xid_before_the_job_in_a_window_given_wider_is_said_to_be_before_it(self):
        """An explicit window that starts before the job: a kernel event before the job's prolog
        is named "(before the job started)" and not ranked as the job's cause."""
        loki = Loki()
        try:
            t0 = time.time_ns() - 3600 * NS
            streams = job_streams(nccl_lines=5, t0=t0)
            # The same Xid 79 on gpu02 five minutes before the job, and the job's own at t0+380s.
            for s in streams:
                if s["stream"]["job"] == "kmsg" and s["stream"]["node"] == "gpu02":
                    s["values"] = sorted(s["values"] + [[str(t0 - 300 * NS + 5), XID79]])
            loki.push(streams)
            start = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime((t0 - 1800 * NS) // NS))
            r = self.run_cli("--loki-url", loki.url, "bundle", "4242", "--start", start, "-o", self.out)
            self.assertEqual(r.returncode, 0, r.stderr)
            (archive,) = glob.glob(self.out + "/*-job4242-*.tar.zst")
            summary = open(extract(archive, self.out + "/x") + "/summary.txt").read()
            cause = summary.split("MOST LIKELY CAUSE")[1].split("BY NODE")[0]
            self.assertIn(time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((t0 + 380 * NS) // NS)), cause)
            self.assertNotIn("before the job started", cause)
            before = [l for l in summary.splitlines() if "Xid 79" in l and "before the job started" in l]
            self.assertEqual(len(before), 1, summary)
            self.assertNotIn("(x2)", summary.split("BY NODE")[1].split("gpu02:")[1])
        finally:
            loki.close()

    def test_a_running_jobs_bundle_reaches_to_now(self):
        """No epilog yet: the job runs. Its lines half an hour after its prolog are in the bundle,
        not cut at the prolog's last record and the margin."""
        loki = Loki()
        try:
            t0 = time.time_ns() - 3600 * NS
            loki.push([s for s in job_streams(nccl_lines=0, t0=t0) if s["stream"].get("phase") != "epilog"
                       and s["stream"]["job"] != "nccl"])
            # The prolog's own end line is no end of the job.
            loki.push([{"stream": {"cluster": "c1", "node": "gpu01", "job": "slurm-prolog-epilog", "job_id": "4242",
                                   "service_name": "slurm-prolog-epilog", "phase": "prolog", "tag": "end"},
                        "values": [[str(t0 + 3 * NS), "prolog end status=0 duration_ms=30"]]}])
            loki.push([{"stream": {"cluster": "c1", "node": "gpu01", "job": "nccl", "job_id": "4242", "file": "0.gpu01.7.log"},
                        "values": [[str(t0 + 1800 * NS), "[t] gpu01:7:7 [0] NCCL WARN half an hour in"]]}])
            r = self.run_cli("--loki-url", loki.url, "bundle", "4242", "-o", self.out)
            self.assertEqual(r.returncode, 0, r.stderr)
            (archive,) = glob.glob(self.out + "/*-job4242-*.tar.zst")
            top = extract(archive, self.out + "/x")
            self.assertIn("half an hour in", open(top + "/timeline.txt").read())
        finally:
            loki.close()

    def test_nodes_given_bundle_names_only_those_nodes(self):
        loki = Loki()
        try:
            loki.push(job_streams(nccl_lines=5))
            r = self.run_cli("--loki-url", loki.url, "bundle", "4242", "--nodes", "gpu02", "-o", self.out)
            self.assertEqual(r.returncode, 0, r.stderr)
            (archive,) = glob.glob(self.out + "/*-job4242-*.tar.zst")
            top = extract(archive, self.out + "/x")
            summary = open(top + "/summary.txt").read()
            self.assertIn("epilog on gpu02: status=1", summary)
            self.assertNotIn("gpu01", summary)
            self.assertEqual(os.listdir(top + "/nodes"), ["gpu02"])
        finally:
            loki.close()

    def test_an_output_path_through_a_link_or_into_a_directory_others_control_is_refused(self):
        """`-o /tmp/x/out` where /tmp/x is a user's link to a directory of root's: root must not
        write there; nor into a directory that user owns, or that anyone may write without the
        sticky bit (they could swap the archive for their own)."""
        if os.geteuid() != 0:
            skips.skip(self, "needs root: the links and directories must be another user's")
        loki = Loki()
        try:
            loki.push(job_streams(nccl_lines=5))
            tmp, victim = self.out + "/tmp", self.out + "/etc"
            os.makedirs(victim)
            os.mkdir(tmp)
            os.chmod(tmp, 0o1777)
            os.symlink(victim, tmp + "/x")
            os.lchown(tmp + "/x", 65534, 65534)
            r = self.run_cli("--loki-url", loki.url, "bundle", "4242", "-o", tmp + "/x/out")
            self.assertEqual(r.returncode, 4, r.stderr)
            self.assertIn(tmp + "/x is a symbolic link owned by uid 65534", r.stderr)
            self.assertEqual(os.listdir(victim), [])
            users, open_dir = tmp + "/users", self.out + "/open"
            os.mkdir(users)
            os.chown(users, 65534, 65534)
            os.mkdir(open_dir)
            os.chmod(open_dir, 0o777)
            for d, why in ((users, "owned by uid 65534"), (open_dir, "no sticky bit")):
                r = self.run_cli("--loki-url", loki.url, "bundle", "4242", "-o", d)
                self.assertEqual(r.returncode, 4, r.stderr)
                self.assertIn(why, r.stderr)
                self.assertEqual(os.listdir(d), [])
            # A link of root's (a site's /var/tmp -> /scratch) is followed, into a sticky /tmp.
            os.symlink(tmp, self.out + "/roots-link")
            r = self.run_cli("--loki-url", loki.url, "bundle", "4242", "-o", self.out + "/roots-link/new/")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(len(glob.glob(tmp + "/new/c1-job4242-*.tar.zst")), 1)
        finally:
            loki.close()

    def test_a_directory_planted_at_the_archives_name_is_left_alone_and_another_name_taken(self):
        loki = Loki()
        try:
            loki.push(job_streams(nccl_lines=5))
            out = self.out + "/o"
            os.mkdir(out)
            os.chmod(out, 0o1777)  # /tmp's way
            now = int(time.time())
            planted = set()
            for t in range(now - 2, now + 120):
                name = "c1-job4242-%s.tar.zst" % time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(t))
                os.mkdir(out + "/" + name)
                planted.add(name)
            r = self.run_cli("--loki-url", loki.url, "bundle", "4242", "-o", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            (archive,) = [f for f in glob.glob(out + "/*.tar.zst") if os.path.isfile(f)]
            self.assertTrue(archive.endswith("-2.tar.zst"), archive)
            self.assertIn("bundle: " + archive, r.stdout)
            with open(archive + ".sha256") as f:
                self.assertEqual(f.read().split()[1], os.path.basename(archive))
            top = extract(archive, self.out + "/x")
            self.assertEqual(os.path.basename(top) + ".tar.zst", os.path.basename(archive))
            self.assertEqual({f for f in os.listdir(out) if os.path.isdir(out + "/" + f)}, planted)
        finally:
            loki.close()

    def test_a_node_of_the_nodelist_without_records_makes_the_bundle_partial_and_is_named(self):
        loki = Loki()
        try:
            streams = job_streams(nccl_lines=10)
            # Both nodes' prologs recorded SLURM_JOB_NODELIST gpu[01-03]; gpu03 shipped nothing.
            for s in streams:
                if s["stream"].get("tag") == "meta":
                    s["values"].append([str(int(s["values"][-1][0]) + 2), "prolog meta nodelist=gpu[01-03]"])
            loki.push(streams)
            r = self.run_cli("--loki-url", loki.url, "bundle", "4242", "-o", self.out)
            self.assertEqual(r.returncode, 3, r.stderr)
            self.assertIn("no records from node(s) gpu03; the bundle is partial", r.stderr)
            self.assertIn("MISSING NODES", r.stdout)
            (archive,) = glob.glob(self.out + "/*.tar.zst")
            top = extract(archive, self.out + "/x")
            m = json.load(open(top + "/manifest.json"))
            self.assertFalse(m["complete"])
            self.assertEqual(m["job"]["nodes"], ["gpu01", "gpu02", "gpu03"])  # gpu03's kernel log was asked for
            self.assertEqual(m["job"]["missing_nodes"], ["gpu03"])
            self.assertFalse([q for q in m["queries"] if q["failed"]])
            summary = open(top + "/summary.txt").read()
            self.assertIn("gpu03: in the job's nodelist but without any prolog/epilog record", summary)
            self.assertIn("Xid 79", summary)  # the rest is there
            # Once gpu03's shipper has caught up, the same command gives the whole bundle.
            t0 = int(streams[0]["values"][0][0])
            loki.push([{"stream": {"cluster": "c1", "node": "gpu03", "job": "slurm-prolog-epilog", "job_id": "4242",
                                   "service_name": "slurm-prolog-epilog", "phase": "prolog", "tag": "meta"},
                        "values": [[str(t0), "prolog meta nodelist=gpu[01-03]"]]}])
            shutil.rmtree(self.out)
            os.makedirs(self.out)
            r = self.run_cli("--loki-url", loki.url, "bundle", "4242", "-o", self.out)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("MISSING NODES", r.stdout)
        finally:
            loki.close()

    def test_a_forged_nodelist_is_said_and_bounded_not_expanded(self):
        loki = Loki()
        try:
            streams = job_streams(nccl_lines=10)
            for s in streams:
                if s["stream"].get("tag") == "meta" and s["stream"]["node"] == "gpu01":
                    s["values"].append([str(int(s["values"][-1][0]) + 2), "prolog meta nodelist=a[1-1000]b[1-1000]"])
            loki.push(streams)
            r = self.run_cli("--loki-url", loki.url, "bundle", "4242", "-o", self.out)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("the job's nodelist is unusable (hostlist \"a[1-1000]b[1-1000]\": more than 16384 hosts",
                          r.stdout)
            (archive,) = glob.glob(self.out + "/*.tar.zst")
            m = json.load(open(extract(archive, self.out + "/x") + "/manifest.json"))
            self.assertEqual(m["job"]["nodes"], ["gpu01", "gpu02"])
        finally:
            loki.close()

    def partial_bundle(self, loki, query_contains, url=None):
        """The bundle of job 4242 while Loki answers 500 to each query whose LogQL holds
        `query_contains`: it exits 3 (partial); its extracted top directory and manifest."""
        loki.push(job_streams(nccl_lines=10))
        http("POST", loki.url + "/-/fault",
             json.dumps({"mode": "status", "status": 500, "body": "rpc error: code = Unavailable\n",
                         "target": "query", "query_contains": query_contains}).encode())
        r = self.run_cli("--loki-url", url or loki.url, "bundle", "4242", "-o", self.out)
        self.assertEqual(r.returncode, 3, r.stderr)  # partial
        self.assertIn("partial", r.stderr)
        (archive,) = glob.glob(self.out + "/*.tar.zst")
        top = extract(archive, self.out + "/x")
        with open(top + "/manifest.json") as f:
            m = json.load(f)
        self.assertFalse(m["complete"])
        return top, m

    def test_a_failing_query_gives_a_partial_bundle_that_says_so(self):
        loki = Loki()
        try:
            # Credentials in the URL are used, and never written into the bundle.
            top, m = self.partial_bundle(loki, "fabric-manager", loki.url.replace("http://", "http://ops:s3cret@"))
            failed = [q for q in m["queries"] if q["failed"]]
            self.assertEqual(sorted(q["name"] for q in failed), ["fabric manager gpu01", "fabric manager gpu02"])
            self.assertIn("HTTP 500", failed[0]["error"])
            self.assertIn("Xid 79", open(top + "/summary.txt").read())  # the rest is there
            for root, _, files in os.walk(top):
                for fn in files:
                    self.assertNotIn(b"s3cret", open(os.path.join(root, fn), "rb").read(), fn)
        finally:
            loki.close()

    def test_a_failing_nccl_step_query_still_bundles_the_nccl_lines_and_says_the_bundle_is_partial(self):
        # Only the query for the lines that name a process's step fails: the NCCL lines come
        # anyway (their files named less well), and the bundle must not claim to be complete.
        loki = Loki()
        try:
            top, m = self.partial_bundle(loki, 'step!=""')
            failed = {q["name"]: q for q in m["queries"] if q["failed"]}
            self.assertEqual(sorted(failed), ["NCCL gpu01", "NCCL gpu02"])
            for q in failed.values():
                self.assertTrue(q["error"].startswith("steps ("), q["error"])
                self.assertIn("HTTP 500", q["error"])
            lines = 0
            for d, _, fs in os.walk(top + "/nccl"):
                for f in fs:
                    with open(os.path.join(d, f)) as fh:
                        lines += len(fh.read().splitlines())
            self.assertEqual(lines, 2 * 2 * 10 + 2)  # both ranks of both nodes, and gpu01's two WARNs
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

    def test_a_long_jobs_kernel_lines_go_at_their_kernel_time(self):
        """A 2.5 h job, Xid 30 min in: the epilog writes the record at its end, stamped then,
        with the kernel's time in the line. The bundle puts it 30 min in, locally and from Loki."""
        def iso(ns):
            return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // NS)) + ".%09dZ" % (ns % NS)
        end = time.time_ns() - 60 * NS
        t0 = end - 9000 * NS
        xid_at = t0 + 1800 * NS
        kmsg_line = "kmsg 4,200,2000,-,time=%s;%s" % (iso(xid_at), XID79.replace("'", "\\x27"))
        prolog = [(t0, "meta node=gpu07"), (t0 + 1, 'status[10-check.sh] status=0 duration_ms=3 result="exit 0"')]
        epilog = [(end, "stdout[50-health.sh] checking"), (end + 1, kmsg_line), (end + 2, "kmsg-dict SUBSYSTEM=pci"),
                  (end + 3, "end status=0 duration_ms=9")]

        def check(top, how):
            timeline = open(top + "/timeline.txt").read().splitlines()
            at = [i for i, l in enumerate(timeline) if "epilog" in l.split(" ")[2] and " kmsg " in l]
            self.assertEqual(len(at), 1, (how, timeline))
            self.assertTrue(timeline[at[0]].startswith(iso(xid_at)), (how, timeline[at[0]]))
            order = [next(i for i, l in enumerate(timeline) if k in l) for k in ("10-check.sh", " kmsg ", "50-health.sh")]
            self.assertEqual(order, sorted(order), (how, timeline))
            dict_line = next(l for l in timeline if "kmsg-dict" in l)
            self.assertTrue(dict_line.startswith(iso(xid_at)), (how, dict_line))

        # Locally: the job logs as the collectors write them.
        logs = self.out + "/logs"
        for ph, lines in (("prolog", prolog), ("epilog", epilog)):
            os.makedirs(logs + "/" + ph)
            with open(logs + "/%s/4343.log" % ph, "w") as f:
                f.write("".join("%s %s\n" % (iso(t), l) for t, l in lines))
        with open(self.out + "/cfg.yaml", "w") as f:
            f.write("cluster: lab\ncollector: {log_dir: %s}\n" % logs)
        r = self.run_cli("bundle", "4343", "--local", "-o", self.out, config=self.out + "/cfg.yaml")
        self.assertEqual(r.returncode, 0, r.stderr)
        (archive,) = glob.glob(self.out + "/lab-job4343-*.tar.zst")
        top = extract(archive, self.out + "/local")
        kmsg = open(top + "/nodes/gpu07/kmsg.log").read()
        self.assertTrue(kmsg.startswith(iso(xid_at) + " NVRM: Xid"), kmsg)
        self.assertIn("Xid 79", open(top + "/summary.txt").read())
        timeline = open(top + "/timeline.txt").read().splitlines()
        order = [next(i for i, l in enumerate(timeline) if k in l) for k in ("10-check.sh", "NVRM: Xid", "50-health.sh")]
        self.assertEqual(order, sorted(order), timeline)
        os.unlink(archive)

        # From Loki: as the shipper sends them, "<phase> <tag> <text>" stamped as written.
        loki = Loki()
        try:
            lab = {"cluster": "c1", "node": "gpu07", "job": "slurm-prolog-epilog", "job_id": "4343"}
            loki.push([{"stream": dict(lab, phase=ph), "values": [[str(t), ph + " " + l] for t, l in lines]}
                       for ph, lines in (("prolog", prolog), ("epilog", epilog))])
            r = self.run_cli("--loki-url", loki.url, "bundle", "4343", "-o", self.out)
            self.assertEqual(r.returncode, 0, r.stderr)
            (archive,) = glob.glob(self.out + "/*-job4343-*.tar.zst")
            check(extract(archive, self.out + "/loki"), "loki")
        finally:
            loki.close()

    def test_a_bad_job_id_is_refused_before_any_query(self):
        # Port 9 answers nothing: had a query been tried, the exit would be 3 (cannot reach Loki).
        for bad in ["../../etc", "4242;id", "4242_1", "4242+1", "-1", "42 42", "", "1" * 21, "42\n43"]:
            r = self.run_cli("--loki-url", "http://127.0.0.1:9", "bundle", "-o", self.out, "--", bad)
            self.assertEqual(r.returncode, 2, (bad, r.stderr))
            self.assertIn('bad job id "%s"' % bad.replace("\n", "\\x0a"), r.stderr)
            self.assertNotIn("cannot reach Loki", r.stderr)
            self.assertEqual(os.listdir(self.out), [], bad)

    def test_hostile_label_values_never_leave_the_output_dir(self):
        """Whoever can push to Loki chooses phase, node, file and cluster: none of it may become
        a path outside the output directory or a tar member that escapes on extraction."""
        loki = Loki()
        t0 = time.time_ns() - 3600 * NS
        out = self.out + "/a/b/c/out"
        os.makedirs(out)
        hostile = ["../../x/ESCAPED", "../../../x/ESCAPED", "../../../../../x/ESCAPED", "/etc/passwd", "..", ".",
                   "gpu\n01", "caf\u00e9\ufffd\x01", "a/b", "a_b", "y" * 300]
        try:
            streams = [{"stream": {"job": "slurm-prolog-epilog", "job_id": "4242", "node": "gpu01", "phase": "prolog",
                                   "cluster": "../../../x/ESCAPED"},
                        "values": [[str(t0), "prolog meta user=alice"]]}]
            # One cluster for all (records of two are never merged), named as a path would escape.
            for i, h in enumerate(hostile):
                streams.append({"stream": {"job": "slurm-prolog-epilog", "job_id": "4242", "node": h, "phase": h,
                                           "cluster": "../../../x/ESCAPED"},
                                "values": [[str(t0 + i + 1), "prolog meta hostile=%d\nFORGED Xid 79" % i]]})
                streams.append({"stream": {"job": "nccl", "job_id": "4242", "node": "gpu01", "file": h,
                                           "cluster": "../../../x/ESCAPED"},
                                "values": [[str(t0 + i + 1), "NCCL INFO from file %d" % i]]})
            loki.push(streams)
            r = self.run_cli("--loki-url", loki.url, "bundle", "4242", "-o", out, "--parallel", "8")
            self.assertEqual(r.returncode, 0, r.stderr)
            outside = {p for p in everything_under(self.out) if not p.startswith(out + "/")}
            self.assertEqual(outside, {self.out + "/a", self.out + "/a/b", self.out + "/a/b/c", out})
            archives = glob.glob(out + "/*.tar.zst")
            self.assertEqual(len(archives), 1, os.listdir(out))
            self.assertEqual(sorted(os.listdir(out)), sorted([os.path.basename(archives[0]),
                                                              os.path.basename(archives[0]) + ".sha256"]))
            members = tar_members(archives[0])
            bad = [n for n in members if not clean_member(n)]
            self.assertEqual(bad, [])
            (top,) = {n.split("/")[0] for n in members}
            # Nothing was dropped, and no two values were merged into one file.
            nccl = {n: c for n, c in members.items() if "/nccl/" in n}
            self.assertEqual(len(nccl), len(hostile), sorted(nccl))
            for i in range(len(hostile)):
                self.assertEqual(sum(b"from file %d\n" % i in c for c in nccl.values()), 1, i)
            phases = [n for n in members if "/nodes/" in n and ("prolog" in n or "phase-" in n)]
            self.assertEqual(len(phases), len(hostile) + 1, sorted(phases))
            # A newline in a line does not forge a record of its own.
            for n, c in members.items():
                self.assertFalse(any(l.startswith(b"FORGED") for l in (c or b"").splitlines()), n)
            self.assertNotIn(b"\nFORGED", members[top + "/timeline.txt"])
            m = json.loads(members[top + "/manifest.json"])
            self.assertEqual({f["path"] for f in m["files"]} | {"manifest.json"}, {n[len(top) + 1:] for n in members})
        finally:
            loki.close()

    def test_an_error_body_cut_inside_a_character_still_gives_a_partial_bundle(self):
        loki = Loki()
        try:
            loki.push(job_streams(nccl_lines=10))
            # A proxy's page in UTF-8: the 300-byte cut of the error lands inside a character.
            body = "x" * 299 + "\u00e9\u20ac" * 40
            self.assertEqual(len(body.encode()[:300].decode("utf-8", "ignore").encode()), 299)
            http("POST", loki.url + "/-/fault", json.dumps({"mode": "status", "status": 502, "body": body,
                                                           "target": "query", "query_contains": "fabric-manager"}).encode())
            r = self.run_cli("--loki-url", loki.url, "bundle", "4242", "-o", self.out)
            self.assertEqual(r.returncode, 3, r.stderr)
            self.assertIn("partial", r.stderr)
            self.assertEqual([f for f in os.listdir(self.out) if f.endswith(".partial")], [])
            (archive,) = glob.glob(self.out + "/*.tar.zst")
            top = extract(archive, self.out + "/x")
            with open(top + "/manifest.json", "rb") as f:
                m = json.loads(f.read().decode("utf-8"))  # strict: valid UTF-8 or this raises
            failed = {q["name"]: q["error"] for q in m["queries"] if q["failed"]}
            self.assertEqual(sorted(failed), ["fabric manager gpu01", "fabric manager gpu02"])
            self.assertEqual(failed["fabric manager gpu01"], "HTTP 502: " + "x" * 299)
        finally:
            loki.close()

    def test_local_bundle_reads_only_regular_files_the_user_owns(self):
        """Run as root over a job user's NCCL directory holding a link to a root-only file, a
        hard link to it, a FIFO, a link to /dev/zero and a subdirectory: only the user's own
        regular files are read, promptly, and the manifest and stderr say what was not."""
        if os.geteuid() != 0:
            skips.skip(self, "needs root: the CLI's reads as root are what is tested")
        logs, uid = self.out + "/logs", 65534
        os.makedirs(logs + "/prolog")
        nccl = logs + "/nccl/4242"
        os.makedirs(nccl)
        os.makedirs(self.out + "/root-only", mode=0o700)
        secret = self.out + "/root-only/shadow"
        with open(secret, "w") as f:
            f.write("root:TOPSECRET:19000:0:99999:7:::\n")
        os.chmod(secret, 0o600)
        with open(logs + "/prolog/4242.log", "w") as f:
            f.write("2026-11-29T21:52:01.000000000Z meta node=gpu07\n")
        good = nccl + "/0.gpu07.55.log"
        with open(good, "w") as f:
            f.write("[2026-11-29T21:52:20.000000+0000] gpu07:55:55 [0] NCCL INFO good line 1\n"
                    "[2026-11-29T21:52:21.000000+0000] gpu07:55:55 [0] NCCL INFO good line 2\n")
        odd = os.fsencode(nccl) + b"/1.\xff\nodd.log"  # a name that is neither UTF-8 nor one line
        with open(odd, "wb") as f:
            f.write(b"odd name line\n")
        os.symlink(secret, nccl + "/leak.log")
        os.link(secret, nccl + "/hard.log")
        os.mkfifo(nccl + "/fifo.log")
        os.symlink("/dev/zero", nccl + "/zero.log")
        os.makedirs(nccl + "/sub")
        with open(nccl + "/sub/x.log", "w") as f:
            f.write("TOPSECRET in a subdirectory\n")
        for p in (nccl, good, odd, nccl + "/sub", nccl + "/sub/x.log"):
            os.chown(p, uid, uid)
        with open(self.out + "/cfg.yaml", "w") as f:
            f.write("cluster: lab\ncollector: {log_dir: %s}\n" % logs)
        t = time.monotonic()
        r = self.run_cli("bundle", "4242", "--local", "-o", self.out + "/o", config=self.out + "/cfg.yaml", timeout=30)
        self.assertLess(time.monotonic() - t, 30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([f for f in os.listdir(self.out + "/o") if not f.startswith("lab-job4242-")], [])
        (archive,) = glob.glob(self.out + "/o/*.tar.zst")
        members = tar_members(archive)
        self.assertEqual([n for n in members if not clean_member(n)], [])
        for n, c in members.items():
            self.assertNotIn(b"TOPSECRET", c or b"", n)
        (top,) = {n.split("/")[0] for n in members}
        nccl_files = {n[len(top) + 1:]: c for n, c in members.items() if "/nccl/" in n}
        self.assertEqual(sorted(nccl_files), ["nccl/gpu07/0.gpu07.55.log", "nccl/gpu07/1.%FF%0Aodd.log"])
        lines = nccl_files["nccl/gpu07/0.gpu07.55.log"].decode().splitlines()
        self.assertEqual([l.split("NCCL INFO ")[1] for l in lines], ["good line 1", "good line 2"])
        m = json.loads(members[top + "/manifest.json"])
        self.assertEqual({x["path"]: x["reason"] for x in m["refused"]},
                         {"leak.log": "symlink", "hard.log": "hard_link", "fifo.log": "not_regular",
                          "zero.log": "symlink", "sub": "not_regular"})
        for name in ("leak.log", "hard.log", "fifo.log", "zero.log", "sub"):
            self.assertIn("not bundled: %s/%s" % (nccl, name), r.stderr)

    def test_a_full_disk_while_bundling_fails_loudly_never_a_complete_bundle_missing_lines(self):
        """A user who can fill the output filesystem must not be able to strip lines from their
        job's bundle: a write the disk refused fails the bundle, it is never called complete."""
        import resource, signal
        logs = self.out + "/logs"
        os.makedirs(logs + "/epilog")
        with open(logs + "/epilog/4343.log", "w") as f:
            f.write("2026-11-29T21:52:01.000000000Z meta node=gpu07\n")
            for i in range(6000):
                f.write("2026-11-29T21:52:02.%09dZ stdout[10-site.sh] line %05d %s\n" % (i, i, "x" * 60))
            f.write('2026-11-29T21:53:00.000000000Z end status=0 duration_ms=5\n')
        with open(self.out + "/cfg.yaml", "w") as f:
            f.write("cluster: lab\ncollector: {log_dir: %s}\n" % logs)
        os.makedirs(self.out + "/small")

        def small_disk():  # as a filesystem with 200 KB left: writes past it fail with EFBIG
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))

        r = subprocess.run([JOBTRAIL, "--config", self.out + "/cfg.yaml", "bundle", "4343", "--local", "-o",
                            self.out + "/small"], capture_output=True, text=True, timeout=120, preexec_fn=small_disk)
        self.assertNotIn(r.returncode, (0, 3), r.stdout + r.stderr)
        self.assertIn("cannot write", r.stderr)
        self.assertIn("File too large", r.stderr)
        self.assertEqual([f for f in os.listdir(self.out + "/small") if f.endswith(".tar.zst")], [])
        self.assertEqual(os.listdir(self.out + "/small"), [])  # nothing half-made left behind
        # With room, the same bundle is whole.
        r = self.run_cli("bundle", "4343", "--local", "-o", self.out + "/small", config=self.out + "/cfg.yaml")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_bundle_into_a_directory_a_user_can_write_leaves_what_they_planted_alone(self):
        """Root bundles into a directory every user can write (sticky, as /tmp). A user filled it
        beforehand with the staging directories of the next pids and links at the archive's names
        of the next minute, all pointing at root-only files: root's bundle writes and reads none
        of them, and takes another name for the archive. (A directory the user owns is refused:
        test_an_output_path_through_a_link_or_into_a_directory_others_control_is_refused.)"""
        logs, root = self.out + "/logs", os.geteuid() == 0
        os.makedirs(logs + "/prolog")
        with open(logs + "/prolog/4242.log", "w") as f:
            f.write("2026-11-29T21:52:01.000000000Z meta node=gpu07\n"
                    '2026-11-29T21:52:02.000000000Z status[10-check.sh] status=0 duration_ms=3 result="exit 0"\n')
        with open(self.out + "/cfg.yaml", "w") as f:
            f.write("cluster: lab\ncollector: {log_dir: %s}\n" % logs)
        os.makedirs(self.out + "/root-only", mode=0o700)
        secret, target = self.out + "/root-only/shadow", self.out + "/root-only/target"
        secrets = {secret: "root:TOPSECRET:19000:0:99999:7:::\n", target: "TOPSECRET archive target\n"}
        for p, text in secrets.items():
            with open(p, "w") as f:
                f.write(text)
            os.chmod(p, 0o600)
        shared = self.out + "/shared"
        os.makedirs(shared)
        os.chmod(shared, 0o1777 if root else 0o700)

        def own(paths):  # the real scenario as root: a user's directory, a user's links
            for p in paths if root else ():
                os.lchown(p, 65534, 65534)

        def plant(pid):
            """A staging directory as the user leaves it for one pid: what is there, and the links."""
            d = "%s/.jobtrail-job4242-%d.partial" % (shared, pid)
            entries = {d: "dir", d + "/nodes": "dir", d + "/nodes/gpu07": "dir"}
            entries.update({d + "/" + n: secret for n in ("timeline.txt", "summary.txt", "manifest.json",
                                                            "nodes/gpu07/prolog.log", "nodes/gpu07/kmsg.log")})
            if not os.path.lexists(d):
                os.makedirs(d + "/nodes/gpu07")
                for p, to in entries.items():
                    if to != "dir":
                        os.symlink(to, p)
                own(entries)
            return entries

        planted = {}
        try:
            with open("/proc/sys/kernel/ns_last_pid") as f:
                last = int(f.read())
        except OSError:
            last = os.getpid()
        for pid in range(max(2, last - 5), last + 100):  # the next pids, as a user would
            planted.update(plant(pid))
        now = int(time.time())
        for t in range(now - 2, now + 60):
            name = "%s/lab-job4242-%s.tar.zst" % (shared, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(t)))
            os.symlink(target, name)
            os.symlink(secret, name + ".sha256")
            planted.update({name: target, name + ".sha256": secret})
        own([p for p in planted if "/lab-job4242-" in p])

        # Whatever the machine spawned meanwhile, the CLI's own pid is planted too (in the child,
        # before it runs the CLI).
        cli = subprocess.Popen([JOBTRAIL, "--config", self.out + "/cfg.yaml", "bundle", "4242", "--local", "-o", shared],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: plant(os.getpid()))
        out, err = cli.communicate(timeout=120)
        planted.update(plant(cli.pid))
        self.assertEqual(cli.returncode, 0, err)
        for p, text in secrets.items():
            with open(p) as f:
                self.assertEqual(f.read(), text)
        archive = [l for l in out.splitlines() if l.startswith("bundle: ")][0][len("bundle: "):]
        st = os.lstat(archive)
        self.assertTrue(stat.S_ISREG(st.st_mode), "the archive is %o" % st.st_mode)
        self.assertNotIn(archive, planted)  # the names taken are left to whoever took them
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)
        self.assertTrue(stat.S_ISREG(os.lstat(archive + ".sha256").st_mode))
        with open(archive, "rb") as f:
            want = [hashlib.sha256(f.read()).hexdigest(), os.path.basename(archive)]
        with open(archive + ".sha256") as f:
            self.assertEqual(f.read().split(), want)
        raw = subprocess.run(["zstd", "-dc", archive], capture_output=True, check=True).stdout
        self.assertNotIn(b"TOPSECRET", raw)
        import io
        with tarfile.open(fileobj=io.BytesIO(raw)) as t:
            members = t.getmembers()
            self.assertIn(b"meta node=gpu07", b"".join(t.extractfile(m).read() for m in members))
            self.assertEqual({m.name: oct(m.mode) for m in members if m.mode != 0o600}, {})
        after = {p: os.readlink(p) if os.path.islink(p) else "dir" if os.path.isdir(p) else "file"
                 for p in everything_under(shared)}
        for p in (archive, archive + ".sha256"):
            self.assertEqual(after.pop(p), "file")
            planted.pop(p, None)
        self.assertEqual(after, planted)  # as the user left it, and nothing of ours left

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


def write_config(directory, text):
    path = os.path.join(directory, "jobtrail.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


class OneCluster(unittest.TestCase):
    """Two clusters shipping to one Loki (one tenant), each with its own job 4242: every query
    matches one cluster, and the records of two are never merged (issue 27.3)."""

    @classmethod
    def setUpClass(cls):
        cls.loki = Loki()
        cls.t_a = time.time_ns() - 3600 * NS
        cls.t_b = time.time_ns() - 3 * 3600 * NS
        cls.loki.push(job_streams(nccl_lines=5, t0=cls.t_a, cluster="a"))
        cls.loki.push(job_streams(nccl_lines=5, t0=cls.t_b, cluster="b", nodes=("gpu03", "gpu04"), xid_on="gpu03"))

    @classmethod
    def tearDownClass(cls):
        cls.loki.close()

    def setUp(self):
        self.out = tempfile.mkdtemp(prefix="jobtrail-clusters-")

    def tearDown(self):
        shutil.rmtree(self.out, ignore_errors=True)

    def cli(self, *args, config="/dev/null"):
        return subprocess.run([JOBTRAIL, "--config", config, "--loki-url", self.loki.url] + list(args),
                              capture_output=True, text=True, timeout=300)

    def bundle_of(self, *args, config="/dev/null"):
        r = self.cli("bundle", "4242", "-o", self.out, *args, config=config)
        self.assertEqual(r.returncode, 0, r.stderr)
        (archive,) = glob.glob(self.out + "/*-job4242-*.tar.zst")
        top = extract(archive, self.out + "/x")
        return archive, top, json.load(open(top + "/manifest.json")), open(top + "/summary.txt").read()

    def test_the_configured_cluster_bundle_holds_only_its_nodes_window_and_xid(self):
        config = write_config(self.out, "cluster: a\n")
        archive, top, m, summary = self.bundle_of(config=config)
        self.assertTrue(os.path.basename(archive).startswith("a-job4242-"))
        self.assertEqual(m["job"]["cluster"], "a")
        self.assertEqual(sorted(m["job"]["nodes"]), ["gpu01", "gpu02"])
        self.assertEqual(sorted(os.listdir(top + "/nodes")), ["gpu01", "gpu02"])
        # The window is A's job, margin included: B's job three hours ago is not in it.
        start = m["window"]["start"]
        self.assertGreater(start, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((self.t_a - 11 * 60 * NS) / NS)))
        cause = summary.split("MOST LIKELY CAUSE")[1].split("BY NODE")[0]
        self.assertIn("gpu02", cause)
        self.assertNotIn("gpu03", summary)
        self.assertNotIn("gpu04", summary)
        for q in m["queries"]:
            self.assertIn('cluster="a"', q["query"], q["name"])
        # --cluster overrides the config: B's job, B's nodes.
        shutil.rmtree(self.out + "/x")
        os.remove(archive)
        _, top, m, summary = self.bundle_of("--cluster", "b", config=config)
        self.assertEqual(sorted(m["job"]["nodes"]), ["gpu03", "gpu04"])
        self.assertIn("gpu03", summary.split("MOST LIKELY CAUSE")[1].split("BY NODE")[0])
        self.assertNotIn("gpu01", summary)

    def test_without_a_cluster_name_a_job_id_of_two_clusters_is_refused_naming_both(self):
        r = self.cli("bundle", "4242", "-o", self.out)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("job 4242 is in the records of 2 clusters in Loki: a, b", r.stderr)
        self.assertIn("--cluster", r.stderr)
        self.assertEqual(os.listdir(self.out), [])

    def test_streams_of_another_cluster_that_loki_answers_anyway_are_left_out(self):
        """Loki's answer is data (a proxy, a bug, a forged label): a Loki that ignores the
        cluster matcher and answers B's streams too. A's bundle holds none of them, and says so."""
        import http.server, threading
        t0 = time.time_ns() - 3600 * NS

        class Careless(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                u = urllib.parse.urlparse(self.path)
                q = urllib.parse.parse_qs(u.query)
                logql, start, end = q["query"][0], int(q["start"][0]), int(q["end"][0])
                def stream(labels, values):
                    return {"stream": labels, "values": [[str(ts), l] for ts, l in values if start <= ts < end]}
                jl = {"job": "slurm-prolog-epilog", "job_id": "4242"}
                if "slurm-prolog-epilog" in logql:
                    res = [stream(dict(jl, cluster="a", node="gpu01"),
                                  [(t0, "prolog meta user=alice"), (t0 + 60 * NS, "epilog end status=0 duration_ms=1")]),
                           stream(dict(jl, cluster="b", node="gpu09"), [(t0 + 1, "prolog meta user=mallory")])]
                elif '"kmsg"' in logql:
                    res = [stream({"job": "kmsg", "cluster": "a", "node": "gpu01"}, [(t0 + 10 * NS, "eth0: link up")]),
                           stream({"job": "kmsg", "cluster": "b", "node": "gpu01"}, [(t0 + 20 * NS, XID79)])]
                else:
                    res = []
                body = json.dumps({"status": "success", "data": {"resultType": "streams",
                                                                 "result": [r for r in res if r["values"]]}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Careless)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        try:
            r = subprocess.run([JOBTRAIL, "--config", "/dev/null", "--loki-url", "http://127.0.0.1:%d" % srv.server_port,
                                "--cluster", "a", "bundle", "4242", "-o", self.out], capture_output=True, text=True,
                               timeout=120)
            self.assertEqual(r.returncode, 3, r.stderr)
            (archive,) = glob.glob(self.out + "/a-job4242-*.tar.zst")
            top = extract(archive, self.out + "/x")
            m = json.load(open(top + "/manifest.json"))
            self.assertEqual(m["job"]["nodes"], ["gpu01"])
            self.assertIn("record(s) of other clusters", open(top + "/summary.txt").read())
            kernel = [q for q in m["queries"] if q["name"] == "kernel gpu01"][0]
            self.assertTrue(kernel["failed"])
            self.assertIn("of other clusters than a: left out", kernel["error"])
            self.assertEqual(open(top + "/nodes/gpu01/kmsg.log").read().count("\n"), 1)
            self.assertNotIn("Xid", open(top + "/summary.txt").read())
            self.assertNotIn("mallory", open(top + "/timeline.txt").read())
        finally:
            srv.shutdown()

    def test_logql_node_and_xid_ask_one_cluster(self):
        config = write_config(self.out, "cluster: a\n")
        r = self.cli("--json", "logql", "4242", "--nodes", "gpu01", config=config)
        self.assertEqual(r.returncode, 0, r.stderr)
        for q in json.loads(r.stdout):
            self.assertIn('cluster="a"', q["logql"], q["name"])
        r = self.cli("--json", "logql", "4242", "--cluster", "b")
        self.assertTrue(all('cluster="b"' in q["logql"] for q in json.loads(r.stdout)))
        r = self.cli("logql", "4242")
        self.assertNotIn("cluster=", r.stdout)
        self.assertIn("no cluster configured", r.stderr)

        r = self.cli("--json", "xid", "--since", "5h", config=config)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([x["node"] for x in json.loads(r.stdout)], ["gpu02"])
        r = self.cli("--json", "xid", "--since", "5h")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("2 clusters: a, b", r.stderr)
        r = self.cli("--json", "xid", "--since", "5h", "--all-clusters", config=config)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(x["node"] for x in json.loads(r.stdout)), ["a/gpu02", "b/gpu03"])
        self.assertEqual(self.cli("bundle", "4242", "--all-clusters").returncode, 2)  # a job is one cluster's

        r = self.cli("--json", "node", "gpu03", "--since", "5h", config=config)
        self.assertEqual(r.returncode, 1, r.stderr)  # gpu03 is B's: nothing of it in A
        r = self.cli("--json", "node", "gpu03", "--since", "5h", "--cluster", "b")
        self.assertEqual(r.returncode, 0, r.stderr)


DAY = 86400 * NS


def node_streams(jobs, xids, other=(), node="gpu01", cluster="c1"):
    """What gpu01's shippers sent: each job (id, start, end) its prolog's user and GPU 0
    (0000:3b:00.0) and its epilog's end; Xid 79 on that GPU at each time in xids; other kernel
    lines. One push per stream, in time order."""
    lab = {"cluster": cluster, "node": node}
    out = []
    for job, start, end in jobs:
        jl = dict(lab, job="slurm-prolog-epilog", job_id=job, service_name="slurm-prolog-epilog")
        out.append({"stream": jl, "values": [[str(start), "prolog meta user=u%s" % job],
                                             [str(start + 1), "prolog device kind=gpu index=0 bdf=0000:3b:00.0 serial=S0"],
                                             [str(end), "epilog end status=0 duration_ms=1"]]})
    kernel = [(t, XID79) for t in xids] + list(other)
    out.append({"stream": dict(lab, job="kmsg", service_name="kmsg"), "values": [[str(t), l] for t, l in sorted(kernel)]})
    return out


class NodeLongWindow(unittest.TestCase):
    """`jobtrail node --since 400d`: asked from now back (a day, two, four...), it shows what a
    400-day window holds, and once the view's limits are filled it asks for nothing older."""

    def node(self, loki, *args):
        r = subprocess.run([JOBTRAIL, "--config", "/dev/null", "--loki-url", loki.url, "node", "gpu01"] + list(args),
                           capture_output=True, text=True, timeout=300)
        return r

    def test_events_of_every_age_within_400_days_each_with_its_job(self):
        now = time.time_ns()
        # A job at each age, an Xid on its GPU while it ran; one job started before the window
        # and ended in it (its Xid in the window is still its own); one job and Xid well before.
        ages = {"11": 3600 * NS, "12": 3 * DAY, "13": 40 * DAY, "14": 200 * DAY, "15": 399 * DAY}
        jobs = [(j, now - a, now - a + 1000 * NS) for j, a in ages.items()]
        jobs += [("16", now - 400 * DAY - 3600 * NS, now - 400 * DAY + 3600 * NS),
                 ("17", now - 405 * DAY, now - 405 * DAY + 1000 * NS)]
        xids = [start + 100 * NS for j, start, _ in jobs if j != "16"] + [now - 400 * DAY + 1800 * NS]
        loki = Loki("--reject-old-samples-max-age", str(500 * 86400))
        try:
            loki.push(node_streams(jobs, xids, other=[(now - 2 * DAY, "eth0: link up"), (now - 300 * DAY, "usb 1-1: new device")]))
            r = self.node(loki, "--since", "400d", "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            v = json.loads(r.stdout)
            self.assertEqual(sorted(j["job_id"] for j in v["jobs"]), ["11", "12", "13", "14", "15", "16"])
            self.assertTrue(all(j["user"] == "u" + j["job_id"] and j["devices"] for j in v["jobs"]), v["jobs"])
            hit = sorted((e["jobs"], e["attribution"], e["xid"]) for e in v["events"])
            self.assertEqual(hit, [([j], "device", 79) for j in ("11", "12", "13", "14", "15", "16")])
            when = [e["time"] for e in v["events"]]
            self.assertEqual(when, sorted(when))  # oldest first, as before
            self.assertEqual(v["events_not_listed"], 0)
            self.assertNotIn("not_looked_before", v)
            text = self.node(loki, "--since", "400d").stdout
            self.assertNotIn("not listed", text)
            self.assertNotIn("was looked for", text)
            self.assertIn("JOBS NOT HIT\n------------\nnone", text)
            # `xid` over the same window: every Xid in it, counted, the first and last right.
            r = subprocess.run([JOBTRAIL, "--config", "/dev/null", "--loki-url", loki.url, "--json", "xid", "--since",
                                "400d"], capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            (row,) = json.loads(r.stdout)
            self.assertEqual((row["node"], row["xid"], row["count"]), ("gpu01", 79, 6))
            in_window = sorted(x for x in xids if x > now - 400 * DAY)
            self.assertTrue(row["first"].startswith(time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(in_window[0] // NS))))
            self.assertTrue(row["last"].startswith(time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(in_window[-1] // NS))))
        finally:
            loki.close()

    def test_past_the_view_limit_the_newest_events_are_listed_and_the_older_counted(self):
        """10,005 Xids in the last day, a few older: the newest 10,000 are listed, the 5 oldest of
        the day counted as not listed, and nothing before that day asked for."""
        now = time.time_ns()
        flood = [now - 20 * 3600 * NS + i * 5 * NS for i in range(10005)]
        older = [now - 10 * DAY, now - 100 * DAY]
        loki = Loki("--reject-old-samples-max-age", str(500 * 86400))
        try:
            loki.push(node_streams([("21", now - 21 * 3600 * NS, now - 3600 * NS)], older + flood))
            r = self.node(loki, "--since", "400d", "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            v = json.loads(r.stdout)
            self.assertEqual(len(v["events"]), 10000)
            self.assertEqual(v["events_not_listed"], 5)
            first = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(flood[5] // NS))
            self.assertTrue(v["events"][0]["time"].startswith(first), (v["events"][0]["time"], first))
            self.assertTrue(all(e["jobs"] == ["21"] for e in v["events"]))
            self.assertIn("not_looked_before", v)
            self.assertGreater(v["not_looked_before"], time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((now - 2 * DAY) // NS)))
            text = self.node(loki, "--since", "400d").stdout
            self.assertIn("(5 more events not listed: older ones)", text)
            self.assertIn("was looked for", text)
        finally:
            loki.close()


class OtherCommands(unittest.TestCase):
    def test_logql_prints_queries_grafana_parses(self):
        r = subprocess.run([JOBTRAIL, "--config", "/dev/null", "--json", "logql", "4242", "--nodes", "gpu01,gpu[02]"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        qs = json.loads(r.stdout)
        self.assertTrue(any("slurm_job_id" in q["logql"] for q in qs))
        self.assertTrue(any('node=~"gpu01|gpu\\\\[02\\\\]"' in q["logql"] for q in qs))  # regex-quoted node
        if not HAVE_JS:
            skips.skip(self, "Grafana's LogQL grammar missing (npm ci in tests/js)")
        checked = Bundle.check_logql(self, qs)
        used = {l for q in checked for l in q["labels"]}
        # Only labels (and metadata) the shipper produces.
        self.assertLessEqual(used, {"job", "job_id", "node", "unit", "slurm_job_id", "slurm_jobs_running", "attribution",
                                    "cluster", "priority"})

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

    def test_long_windows_go_in_pieces_of_lokis_max_query_length(self):
        """Loki refuses a range over max_query_length (721h by default) with 400: `xid --since
        800h` and `bundle --lookback 40d` split theirs, and learn a smaller limit from the 400."""
        for limit in (721 * 3600, 10 * 86400):
            loki = Loki("--max-query-length", str(limit))
            try:
                loki.push(job_streams(nccl_lines=1, t0=time.time_ns() - 600 * NS))
                # --json after the subcommand, as README shows it.
                r = subprocess.run([JOBTRAIL, "--config", "/dev/null", "--loki-url", loki.url, "xid", "--since", "800h",
                                    "--json"], capture_output=True, text=True, timeout=120)
                self.assertEqual(r.returncode, 0, (limit, r.stderr))
                self.assertEqual([(x["node"], x["xid"]) for x in json.loads(r.stdout)], [("gpu02", 79)])
                out = tempfile.mkdtemp(prefix="jobtrail-split-")
                try:
                    r = subprocess.run([JOBTRAIL, "--config", "/dev/null", "--loki-url", loki.url, "bundle", "4242",
                                        "--lookback", "40d", "-o", out, "--json"],
                                       capture_output=True, text=True, timeout=300)
                    self.assertEqual(r.returncode, 0, (limit, r.stderr))
                    self.assertIn("Xid 79", json.loads(r.stdout)["summary"])
                    self.assertIn("the window is recent", json.loads(r.stdout)["summary"])
                finally:
                    shutil.rmtree(out, ignore_errors=True)
            finally:
                loki.close()

    def test_refusals_say_what_loki_refused(self):
        loki = Loki("--auth")  # a multi-tenant Loki: no X-Scope-OrgID is 401 "no org id"
        try:
            r = subprocess.run([JOBTRAIL, "--config", "/dev/null", "--loki-url", loki.url, "xid", "--since", "2h"],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 3)
            self.assertIn("X-Scope-OrgID", r.stderr)
            self.assertIn("shipper.loki.tenant", r.stderr)
            self.assertNotIn("credentials", r.stderr)
            out = tempfile.mkdtemp(prefix="jobtrail-401-")
            try:
                r = subprocess.run([JOBTRAIL, "--config", "/dev/null", "--loki-url", loki.url, "bundle", "4242",
                                    "-o", out], capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 3)
                self.assertNotIn("cannot reach Loki", r.stderr)
                self.assertIn("shipper.loki.tenant", r.stderr)
            finally:
                shutil.rmtree(out, ignore_errors=True)
        finally:
            loki.close()
        # A limit we will not split under (below a minute) is named as what Loki refused.
        loki = Loki("--max-query-length", "30")
        try:
            r = subprocess.run([JOBTRAIL, "--config", "/dev/null", "--loki-url", loki.url, "xid", "--since", "2h"],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 3)
            self.assertIn("max_query_length", r.stderr)
            self.assertIn("limit: 30s", r.stderr)
        finally:
            loki.close()

    def test_usage_errors_exit_2_and_help_works(self):
        self.assertEqual(subprocess.run([JOBTRAIL, "bundle"], capture_output=True).returncode, 2)
        self.assertEqual(subprocess.run([JOBTRAIL, "bundle", "1", "--margin", "soon"], capture_output=True).returncode, 2)
        for cmd in ([], ["bundle"], ["xid"], ["logql"]):
            r = subprocess.run([JOBTRAIL] + cmd + ["--help"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0)
            self.assertIn("Usage", r.stdout)


def read(path):
    with open(path) as f:
        return f.read()


def dcgm_streams(job="4242", t0=None, cluster="c1"):
    """What the shipper's dcgm source sent while the job ran (job_streams' Xid 79 on gpu02's
    0000:3b:00, the job's GPU 3 there): DCGM's XID 79 on GPU 3 a second after the kernel's line,
    a thermal violation on gpu01 node-wide, and a line no DCGM event reads like."""
    meta79 = {"gpu": "3", "pci_bdf": "00000000:3B:00.0", "event": "xid", "xid": "79", "severity": "fatal",
              "slurm_job_id": job, "attribution": "device"}
    thermal = {"gpu": "1", "pci_bdf": "00000000:18:00.0", "event": "thermal", "severity": "warning",
               "attribution": "node", "slurm_jobs_running": job}
    lab = {"cluster": cluster, "job": "dcgm", "service_name": "dcgm"}
    return [{"stream": dict(lab, node="gpu02"), "values": [[str(t0 + 381 * NS), "XID 79 on GPU 3", meta79],
                                                           [str(t0 + 390 * NS), "XID 79 on GPU 3 <b>forged</b>", meta79]]},
            {"stream": dict(lab, node="gpu01"), "values": [[str(t0 + 200 * NS), "Thermal violation on GPU 1: 95 C", thermal]]},
            {"stream": {"cluster": cluster, "node": "gpu02", "job": "slurm-prolog-epilog", "job_id": job,
                        "service_name": "slurm-prolog-epilog", "phase": "prolog", "tag": "device"},
             "values": [[str(t0 + 3 * NS), "prolog device kind=gpu index=3 bdf=0000:3b:00.0 serial=S3"]]}]


class DcgmEvents(unittest.TestCase):
    """DCGM's events read back from Loki: the kernel's Xid 79 and DCGM's XID 79 on the same GPU a
    second apart are one finding in the bundle, both on its timeline; `jobtrail node` lists the
    DCGM event with the job whose GPU it was; `jobtrail xid` says both sources saw it."""

    def setUp(self):
        self.out = tempfile.mkdtemp(prefix="jobtrail-dcgm-")
        self.loki = Loki()
        self.t0 = time.time_ns() - 3600 * NS
        self.loki.push(job_streams(nccl_lines=5, t0=self.t0) + dcgm_streams(t0=self.t0))

    def tearDown(self):
        self.loki.close()
        shutil.rmtree(self.out, ignore_errors=True)

    def cli(self, *args):
        return subprocess.run([JOBTRAIL, "--config", "/dev/null", "--loki-url", self.loki.url] + list(args),
                              capture_output=True, text=True, timeout=300)

    def test_a_kernel_xid_dcgm_also_reported_is_one_finding_corroborated_by_both(self):
        r = self.cli("bundle", "4242", "-o", self.out)
        self.assertEqual(r.returncode, 0, r.stderr)
        (archive,) = glob.glob(self.out + "/*-job4242-*.tar.zst")
        top = extract(archive, self.out + "/x")
        summary = read(top + "/summary.txt")
        os.makedirs(ARTIFACTS, exist_ok=True)
        with open(os.path.join(ARTIFACTS, "dcgm-bundle-summary.txt"), "w") as f:
            f.write(summary)
        gpu02 = summary.split("BY NODE")[1].split("gpu02:")[1]
        xids = [l for l in gpu02.splitlines() if "Xid 79" in l]
        self.assertEqual(len(xids), 1, summary)
        self.assertIn("corroborated by kernel and DCGM", xids[0])
        self.assertIn("[fatal]", xids[0])
        self.assertIn("on this job's GPU 3", xids[0])
        self.assertNotIn("not in the kernel ring", summary)
        self.assertNotIn("forged", summary)  # not DCGM's: archived, no finding
        cause = summary.split("MOST LIKELY CAUSE")[1].split("BY NODE")[0]
        self.assertIn("corroborated by kernel and DCGM", cause)
        gpu01 = summary.split("BY NODE")[1].split("gpu01:")[1].split("gpu02:")[0]
        self.assertIn("[warning] Thermal violation on GPU 1 (0000:18:00): 95 C", gpu01)
        timeline = read(top + "/timeline.txt").splitlines()
        self.assertEqual(len([l for l in timeline if " gpu02 kmsg " in l and "NVRM: Xid" in l]), 1)
        self.assertEqual(len([l for l in timeline if l.endswith(" gpu02 dcgm XID 79 on GPU 3")]), 1, timeline)
        dcgm_log = read(top + "/nodes/gpu02/dcgm.log")
        self.assertIn("XID 79 on GPU 3\n", dcgm_log)
        self.assertIn("XID 79 on GPU 3 <b>forged</b>", dcgm_log)

    def test_jobtrail_node_lists_the_dcgm_event_with_its_job(self):
        r = self.cli("node", "gpu02", "--since", "3h", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        evs = [(e["source"], e["xid"], e["attribution"], e["jobs"]) for e in json.loads(r.stdout)["events"]]
        self.assertEqual(evs, [("kernel", 79, "device", ["4242"]), ("dcgm", 79, "device", ["4242"])])
        text = self.cli("node", "gpu02", "--since", "3h").stdout
        self.assertIn("] DCGM: Xid 79 on GPU 3 (0000:3b:00)", text)

    def test_jobtrail_xid_says_which_source_saw_it(self):
        r = self.cli("--json", "xid", "--since", "3h")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([(x["node"], x["xid"], x["count"], x["source"]) for x in json.loads(r.stdout)],
                         [("gpu02", 79, 1, "kernel+dcgm")])
        text = self.cli("xid", "--since", "3h").stdout
        self.assertIn(" kernel+dcgm ", text)


if __name__ == "__main__":
    skips.main()
