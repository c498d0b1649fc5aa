#!/usr/bin/python3
"""The node contract end to end: renamed job values keep noise filtering, kernel job tagging,
`jobtrail logql` and `jobtrail bundle` working.
Needs JOBTRAIL_BUILD (the build directory) and root (kmsg fixture)."""
import json, os, subprocess, sys, time, unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
import skips  # noqa: E402
from jtsupport import BUILD, Env, http  # noqa: E402


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
            env.edit_config(("  state_dir:", "  log_dir: %s/slurm\n  state_dir:" % d))
            env.set_sources('{name: jobs, paths: ["%(d)s/slurm/{prolog,epilog}/*.log"], job: gpu-jobs, format: joblog}',
                            '{name: nccl, paths: ["%(d)s/slurm/nccl/*/*.log"], job: gpu-nccl, format: nccl}')
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
            self.assertIn('{job="gpu-nccl", cluster="e2e", job_id="4242"}', q.stdout)
            self.assertIn('{job="gpu-jobs", cluster="e2e", job_id="4242"}', q.stdout)
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


if __name__ == "__main__":
    skips.main()
