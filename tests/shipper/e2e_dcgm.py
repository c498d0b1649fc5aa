#!/usr/bin/python3
"""The dcgm source end to end, against the stand-in libdcgm (tests/fixtures/dcgm, driven through
$DCGM_STUB_DIR) and the Loki double: an Xid on a job's GPU arrives once with that job, a thermal
violation on nobody's GPU is node-wide, a host engine restart loses and repeats nothing the engine
still reports, and neither a missing library nor a stalled engine holds up the other sources.
Needs JOBTRAIL_BUILD (the build directory) and root (kmsg fixture)."""
import json, os, subprocess, sys, time, unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
import skips  # noqa: E402
from jtsupport import BUILD, Env, wait_for_lines  # noqa: E402

STUB = os.path.join(BUILD, "tests/fixtures/dcgm/libdcgm.so.4")
STUB3 = os.path.join(BUILD, "tests/fixtures/dcgm/libdcgm.so.3")
SHIPPER_STREAM = "jobtrail-shipper"


class Engine:
    """The stand-in host engine's control directory."""

    def __init__(self, d, gpus):
        self.dir = d + "/dcgm"
        os.makedirs(self.dir)
        self.state("up")
        with open(self.dir + "/gpus", "w") as f:
            f.write("".join("%d %s\n" % g for g in gpus))
        open(self.dir + "/commands", "w").close()

    def state(self, s):
        with open(self.dir + "/state.tmp", "w") as f:
            f.write(s + "\n")
        os.rename(self.dir + "/state.tmp", self.dir + "/state")

    def command(self, *lines):
        with open(self.dir + "/commands", "a") as f:
            f.write("".join(l + "\n" for l in lines))

    def log(self):
        try:
            with open(self.dir + "/log") as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def count(self, prefix):
        return sum(1 for l in self.log() if l.startswith(prefix))

    def wait(self, pred, what, seconds=10):
        for _ in range(int(seconds * 20)):
            if pred():
                return
            time.sleep(0.05)
        raise AssertionError("the stand-in never showed %s; its log: %s" % (what, self.log()[-20:]))


def dcgm_env(gpus, libraries=None, jobs=()):
    """An Env whose shipper runs the dcgm source against the stand-in (health checks every second),
    with the given jobs' markers ((id, [(minor, bdf)...]), started a minute ago)."""
    env = Env(shipper_yaml="    dcgm: {enabled: true, libraries: [%s], health_interval: 1s, call_timeout: 1s}"
              % (libraries or STUB))
    engine = Engine(env.dir, gpus)
    os.environ["DCGM_STUB_DIR"] = engine.dir
    os.makedirs(env.dir + "/run/jobs")
    start = int((time.time() - 60) * 1e9)
    for job_id, devices in jobs:
        with open(env.dir + "/run/jobs/" + job_id, "w") as f:
            json.dump({"job_id": job_id, "user": "u", "uid": "1000", "node": "n1", "start_ns": start, "trace": "none",
                       "devices": [{"kind": "gpu", "index": i, "bdf": b} for i, b in devices]}, f)
    return env, engine


def entries(env, job):
    """[(labels, ts, line, metadata)] of the double's streams of `job`."""
    return [(s["labels"], int(e[0]), e[1], e[2]) for s in env.loki.store() if s["labels"].get("job") == job
            for e in s["entries"]]


def now_us():
    return int(time.time() * 1e6)


MISSING = "/nonexistent/libdcgm.so.4"
NEEDS_STUB = skips.requires(os.path.exists(STUB), "the stand-in libdcgm is not built (target dcgm_stub4)")
GPUS = [(0, "00000000:1B:00.0"), (3, "00000000:3B:00.0"), (5, "00000000:5E:00.0")]


class DcgmEventsAttributed(unittest.TestCase):
    @NEEDS_STUB
    def test_xid_on_a_jobs_gpu_arrives_once_with_the_job_and_thermal_on_nobodys_gpu_is_node_wide(self):
        """Two jobs run: 4242 owns GPU 3 (the kernel's 0000:3b:00.0, DCGM's 00000000:3B:00.0), 4343
        owns GPU 5. DCGM reports XID 79 on GPU 3 and a thermal violation on GPU 0, which no job
        owns: the Xid is job 4242's alone, the thermal violation every running job's."""
        self.attributed(STUB)

    @NEEDS_STUB
    def test_the_same_with_dcgm_3(self):
        """DCGM 3.x's callback does not say the GPU (one registration per GPU tells it): the same
        lines, the same jobs."""
        self.attributed(STUB3)

    def attributed(self, library):
        env, engine = dcgm_env(GPUS, library, jobs=[("4242", [(3, "0000:3b:00.0")]), ("4343", [(5, "0000:5e:00.0")])])
        try:
            env.start()
            per_gpu = len(GPUS) if library == STUB3 else 1  # 3.x: a registration per GPU
            engine.wait(lambda: engine.count("register") >= per_gpu, "the registrations")
            ts = now_us()
            engine.command("violation 3 xid %d 79" % ts, "violation 0 thermal %d 95" % (ts + 10))
            wait_for_lines(env, "dcgm", lambda l: len(l) >= 2)
            # A few more health checks and passes: nothing arrives twice.
            checks = engine.count("health_check")
            engine.wait(lambda: engine.count("health_check") >= checks + 2, "two more health checks")
            got = entries(env, "dcgm")
            self.assertEqual([e[2] for e in got], ["XID 79 on GPU 3", "Thermal violation on GPU 0: 95 C"], got)
            labels, xts, _, xmeta = got[0]
            self.assertEqual(labels, {"cluster": "e2e", "node": "n1", "job": "dcgm", "service_name": "dcgm"})
            self.assertEqual(xts, ts * 1000)  # DCGM's own time
            self.assertEqual(xmeta, {"gpu": "3", "pci_bdf": "00000000:3B:00.0", "event": "xid", "xid": "79",
                                     "severity": "fatal", "slurm_job_id": "4242",
                                     "slurm_jobs_running": "4242,4343", "attribution": "device"})
            _, tts, _, tmeta = got[1]
            self.assertEqual(tts, (ts + 10) * 1000)
            self.assertEqual(tmeta, {"gpu": "0", "pci_bdf": "00000000:1B:00.0", "event": "thermal",
                                     "severity": "warning", "slurm_jobs_running": "4242,4343",
                                     "attribution": "node"})
        finally:
            env.close()


class DcgmHostEngineRestart(unittest.TestCase):
    @NEEDS_STUB
    def test_a_restart_loses_and_repeats_nothing_the_engine_reports_and_the_kernel_ships_meanwhile(self):
        """Two incidents are active; the host engine goes down. A kernel record written during the
        outage arrives while it lasts. Meanwhile one incident clears and another appears; the
        engine comes back: the source registers again, ships the clearing and the new incident,
        and the incident that stayed is still the one line it was."""
        env, engine = dcgm_env(GPUS)
        try:
            engine.command("incident 3 4 mem fail Detected 2 volatile DBEs on GPU 3",
                           "incident 5 3 pcie warn PCIe replay rate 12 per minute")
            env.start()
            wait_for_lines(env, "dcgm", lambda l: len(l) >= 2)
            engine.state("down")
            wait_for_lines(env, SHIPPER_STREAM, lambda l: any("lost DCGM's host engine" in x for x in l))
            env.kmsg(["kernel record during the DCGM outage"])
            wait_for_lines(env, "kmsg", lambda l: "kernel record during the DCGM outage" in l)
            engine.command("clear 5 3", "incident 0 13 nvlink warn NVLink error threshold on GPU 0")
            registrations = engine.count("register")
            engine.state("up")
            engine.wait(lambda: engine.count("register") > registrations, "a new registration after the restart")
            wait_for_lines(env, "dcgm", lambda l: len(l) >= 4)
            checks = engine.count("health_check")
            engine.wait(lambda: engine.count("health_check") >= checks + 2, "two more health checks")
            lines = env.store_lines("dcgm")
            self.assertEqual(sorted(lines), sorted([
                "DCGM_FR_VOLATILE_DBE_DETECTED on GPU 3 (mem, fail): Detected 2 volatile DBEs on GPU 3",
                "DCGM_FR_PCI_REPLAY_RATE on GPU 5 (pcie, warn): PCIe replay rate 12 per minute",
                "DCGM_FR_PCI_REPLAY_RATE on GPU 5 (pcie) cleared",
                "DCGM_FR_NVLINK_ERROR_THRESHOLD on GPU 0 (nvlink, warn): NVLink error threshold on GPU 0"]), lines)
            own = env.store_lines(SHIPPER_STREAM)
            self.assertEqual(sum("are not replayed by DCGM" in l for l in own), 1, own)
        finally:
            env.close()


class DcgmUnavailable(unittest.TestCase):
    @NEEDS_STUB
    def test_no_library_is_one_notice_and_the_other_sources_ship_as_before(self):
        env, engine = dcgm_env(GPUS, libraries=MISSING)
        try:
            with open(env.dir + "/logs/a.log", "w") as f:
                f.write("an application line\n")
            env.kmsg(["a kernel record"])
            env.start()
            wait_for_lines(env, "app", lambda l: "an application line" in l)
            wait_for_lines(env, "kmsg", lambda l: "a kernel record" in l)
            own = wait_for_lines(env, SHIPPER_STREAM, lambda l: any("cannot use DCGM" in x for x in l))
            notice = [l for l in own if "cannot use DCGM" in l]
            self.assertIn(MISSING, notice[0])
            # Retried after 1 s and 2 s more: still the one notice.
            time.sleep(3.5)
            own = env.store_lines(SHIPPER_STREAM)
            self.assertEqual(sum("cannot use DCGM" in l for l in own), 1, own)
            self.assertEqual(env.store_lines("dcgm"), [])
            self.assertEqual(engine.log(), [])  # the stand-in was never loaded
        finally:
            env.close()


class DcgmStall(unittest.TestCase):
    @NEEDS_STUB
    def test_a_stalled_engine_delays_no_other_source(self):
        """The host engine stops answering (every call blocks): the kernel's and the files' lines
        ship meanwhile; when it answers again, its violations arrive."""
        env, engine = dcgm_env(GPUS)
        try:
            env.start()
            engine.wait(lambda: engine.count("register") >= 1, "a registration")
            engine.state("stall")
            time.sleep(1.5)  # past the call timeout: the source's health call is stuck
            env.kmsg(["kernel record during the stall"])
            with open(env.dir + "/logs/a.log", "w") as f:
                f.write("application line during the stall\n")
            wait_for_lines(env, "kmsg", lambda l: "kernel record during the stall" in l)
            wait_for_lines(env, "app", lambda l: "application line during the stall" in l)
            registrations = engine.count("register")
            engine.state("up")
            wait_for_lines(env, SHIPPER_STREAM, lambda l: any("lost DCGM's host engine" in x for x in l))
            engine.wait(lambda: engine.count("register") > registrations, "a registration after the stall")
            engine.command("violation 0 xid %d 13" % now_us())
            wait_for_lines(env, "dcgm", lambda l: l == ["XID 13 on GPU 0"])
        finally:
            env.close()


class DcgmToBundle(unittest.TestCase):
    @NEEDS_STUB
    def test_an_xid_dcgm_and_the_kernel_report_is_one_finding_in_the_jobs_bundle_and_in_jobtrail_node(self):
        """The whole way: job 4242 owns GPU 3; the kernel prints Xid 79 for it and DCGM reports XID 79
        on GPU 3 a moment later. Both reach Loki through the shipper; the job's bundle, fetched from
        there, has one finding corroborated by both, and `jobtrail node` lists DCGM's event with the job."""
        env, engine = dcgm_env(GPUS, jobs=[("4242", [(3, "0000:3b:00.0")])])
        try:
            d = env.dir
            os.makedirs(d + "/slurm/prolog")
            iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() - 60))
            with open(d + "/slurm/prolog/4242.log", "w") as f:
                f.write("%(t)s.000000001Z meta phase=prolog\n%(t)s.000000002Z meta node=n1\n"
                        "%(t)s.000000003Z device kind=gpu index=3 bdf=0000:3b:00.0 serial=S3\n"
                        "%(t)s.000000004Z end status=0 duration_ms=1.0 scripts_run=0\n" % {"t": iso})
            env.edit_config(("  state_dir:", "  log_dir: %s/slurm\n  state_dir:" % d))
            env.set_sources('{name: jobs, paths: ["%(d)s/slurm/prolog/*.log"], job: slurm-prolog-epilog, format: joblog}')
            env.start()
            engine.wait(lambda: engine.count("register") >= 1, "the registration")
            env.kmsg(["NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."])
            wait_for_lines(env, "kmsg", lambda l: any("Xid" in x for x in l))
            engine.command("violation 3 xid %d 79" % now_us())
            wait_for_lines(env, "dcgm", lambda l: l == ["XID 79 on GPU 3"])
            got = entries(env, "dcgm")
            self.assertEqual(len(got), 1, got)
            self.assertEqual(got[0][3].get("slurm_job_id"), "4242")
            cli = os.path.join(BUILD, "cli/jobtrail")
            out = d + "/bundle"
            os.makedirs(out)
            b = subprocess.run([cli, "--config", d + "/cfg.yaml", "--loki-url", env.url, "bundle", "4242",
                                "--output-dir", out, "--lookback", "1h"], capture_output=True, text=True, timeout=120)
            self.assertEqual(b.returncode, 0, b.stdout + b.stderr)
            (archive,) = [f for f in os.listdir(out) if f.endswith(".tar.zst")]
            summary = subprocess.run(["tar", "--zstd", "-xOf", out + "/" + archive, "--wildcards", "*summary.txt"],
                                     capture_output=True, text=True, timeout=30).stdout
            # What the issue asks the note to show: the summary, and the dcgm lines as Loki stored them.
            os.makedirs(os.path.join(BUILD, "test-artifacts"), exist_ok=True)
            with open(os.path.join(BUILD, "test-artifacts", "dcgm-e2e-bundle.txt"), "w") as f:
                f.write(summary + "\n--- {job=\"dcgm\"} in the double ---\n" + json.dumps(entries(env, "dcgm")) + "\n")
            xids = [l for l in summary.split("BY NODE")[-1].splitlines() if "Xid 79" in l]
            self.assertEqual(len(xids), 1, summary)
            self.assertIn("corroborated by kernel and DCGM", xids[0])
            self.assertIn("on this job's GPU 3", xids[0])
            node = subprocess.run([cli, "--config", d + "/cfg.yaml", "--loki-url", env.url, "node", "n1", "--since",
                                   "1h", "--json"], capture_output=True, text=True, timeout=60)
            self.assertEqual(node.returncode, 0, node.stderr)
            evs = [(e["source"], e["xid"], e["jobs"]) for e in json.loads(node.stdout)["events"]]
            self.assertIn(("dcgm", 79, ["4242"]), evs)
        finally:
            env.close()


if __name__ == "__main__":
    skips.main()
