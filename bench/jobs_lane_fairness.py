#!/usr/bin/python3
"""The jobs lane shared by users: how long another user's NCCL line takes to reach Loki after one
user's jobs wrote a burst (hostile-users issue 25, point 7). Prints figures, asserts nothing.
Needs JOBTRAIL_BUILD (the build directory) and root (files of two users, the kmsg fixture).
    JOBTRAIL_BUILD=build /usr/bin/python3 bench/jobs_lane_fairness.py [burst_MB] [jobs_of_A]
SPOOL= (default 32MiB: the jobs lane is half) and GAP= (seconds between the burst and the line)."""
import os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../tests/support"))
from jtsupport import Env  # noqa: E402

ALICE, BOB = 1000, 1001
SPOOL = os.environ.get("SPOOL", "32MiB")  # the jobs lane is half of it
LINE = "n1:100:100 [0] NCCL INFO burst line %08d " + "b" * 80 + "\n"


def job_dir(env, job, uid):
    d = "%s/nccl/%d" % (env.dir, job)
    os.makedirs(d)
    os.chown(d, uid, uid)
    return d


def write(path, uid, text):
    with open(path, "a") as f:
        f.write(text)
    os.chown(path, uid, uid)


def main():
    burst_mb = float(sys.argv[1]) if len(sys.argv) > 1 else 26
    a_jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    # Loki holds alice's streams to its per-stream rate, as a real one would a 26 MB burst.
    env = Env(loki_args=["--per-stream-rate-kb", "1024", "--per-stream-burst-kb", "1024"],
              shipper_yaml="  spool: {max_size: %s}" % SPOOL)
    try:
        env.set_sources('{name: nccl, paths: ["%(d)s/nccl/*/*.log"], job: nccl, format: nccl}')
        os.makedirs(env.dir + "/nccl")
        dirs = [job_dir(env, 4000 + j, ALICE) for j in range(a_jobs)]
        bob = job_dir(env, 5000, BOB)
        write(bob + "/0.n1.200.log", BOB, "")
        env.start()
        time.sleep(2)  # the shipper is up and tracks bob's file
        n = int(burst_mb * 1e6 / len(LINE % 0)) // a_jobs
        for j, d in enumerate(dirs):
            write(d + "/0.n1.100.log", ALICE, "".join(LINE % (j * n + i) for i in range(n)))
        time.sleep(float(os.environ.get("GAP", "0")))  # bob writes while the burst is being read
        write(bob + "/0.n1.200.log", BOB, "n1:200:200 [0] NCCL WARN bob's own line\n")
        t0 = time.time()
        bob_at = None
        while time.time() - t0 < 120 and bob_at is None:
            if any("bob's own line" in l for l in env.store_lines("nccl")):
                bob_at = time.time() - t0
            time.sleep(0.1)
        t_all = time.time()
        while time.time() - t_all < 5 and sum("burst line" in l for l in env.store_lines("nccl")) < n * a_jobs:
            time.sleep(0.5)
        stored = sum("burst line" in l for l in env.store_lines("nccl"))
        print("jobs lane fairness: alice wrote %.1f MB in %d job(s) (%d lines); bob's NCCL line in Loki after %s s; "
              "alice's lines delivered %d of %d" % (burst_mb, a_jobs, n * a_jobs,
                                                     "%.1f" % bob_at if bob_at is not None else "never (120)",
                                                     stored, n * a_jobs))
    finally:
        env.close()


if __name__ == "__main__":
    main()
