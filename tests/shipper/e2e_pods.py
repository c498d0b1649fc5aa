#!/usr/bin/python3
"""jobtrail-shipper on a kubelet-shaped /var/log/pods tree: CRI lines joined, kubelet's rotation
and SIGKILLs while shipping, every line once with the labels from the path.
Needs JOBTRAIL_BUILD (the build directory) and root (kmsg fixture)."""
import json, os, random, re, subprocess, sys, time, unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
import skips  # noqa: E402
from jtsupport import BUILD, Env, http, wait_for_lines, with_prolog  # noqa: E402


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
                                                            '[trainer], job_id_namespaces: [train]}\n'
                                                            '    journald: {' % root))
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


if __name__ == "__main__":
    skips.main()
