#!/usr/bin/python3
"""10,000 one-line files in one job's NCCL directory (owned by a job user, as on a node), shipped
to the Loki test double by `jobtrail-shipper --once`: first with the shipped caps (512 of them
read), then every file tracked (the per-directory, per-owner and per-source caps raised past
10,000, the worst case for descriptors and memory), a second line in every file and a second
run (a restart); last, 300 files each holding a 250 KiB line without newline, with the default
max_partial_bytes and with it out of the way. Prints peak open descriptors (/proc/<pid>/fd,
sampled) and peak RSS (VmHWM) of each run, the lines the double stored and how many were
duplicates. Figures, not assertions (tests/shipper has the asserting test).
    bench/shipper_files.py BUILD_DIR [FILES]      (as root: the files are given to uid 65534)"""
import os, shutil, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../tests/support"))
from jtsupport import LokiDouble, run_sampled  # noqa: E402


def main():
    build = os.path.abspath(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
    w = tempfile.mkdtemp(prefix="jobtrail-filesbench-", dir="/var/tmp")
    loki = LokiDouble("--ingestion-rate-mb", "256", "--burst-mb", "256", "--per-stream-rate-mb", "256",
                      "--per-stream-burst-mb", "256", dir=w)
    url = loki.url
    try:
        job = w + "/nccl/4242"
        os.makedirs(job)
        os.chown(job, 65534, 65534)
        names = [job + "/0.gpu01.%d.log" % i for i in range(n)]
        for i, p in enumerate(names):
            with open(p, "w") as f:
                f.write("[2026-11-29T21:52:22.000001+0000] gpu01:%d:%d [0] NCCL INFO rank %d first\n" % (i, i, i))
            os.chown(p, 65534, 65534)
        caps = n + 1000

        def config(name, job_label, bounds, glob="nccl/*/*.log"):
            with open(w + "/" + name, "w") as f:
                f.write("""cluster: bench
node: gpu01
collector: {state_dir: %(w)s/state-%(job)s, run_dir: %(w)s/run}
shipper:
  loki: {url: "%(url)s"}
  metrics: ""
  sources:
    kmsg: false
    journald: {enabled: false}
    files:
      - {name: nccl, paths: ["%(w)s/%(glob)s"], job: %(job)s, format: nccl%(bounds)s}
""" % {"w": w, "url": url, "job": job_label, "bounds": bounds, "glob": glob})
            return [build + "/shipper/jobtrail-shipper", "--config", w + "/" + name, "--once", "--once-timeout", "600"]

        # As shipped: max_files_per_dir (512) of them read, the rest refused and counted.
        rc, err, fds, rss = run_sampled(config("cfg-default.yaml", "nccl_default", ""))
        if rc != 0:
            sys.exit("shipper exited %d: %s" % (rc, err[-2000:]))
        print("default caps: %d of %d files read, peak %d open fds, peak RSS %.1f MiB"
              % (len(loki.store_lines("nccl_default")), n, fds, rss / 1024))
        cmd = config("cfg.yaml", "nccl", ", max_files: %d, max_files_per_dir: %d, max_files_per_owner: %d"
                     % (caps, caps, caps))
        for rnd in range(2):
            if rnd:
                for i, p in enumerate(names):
                    with open(p, "a") as f:
                        f.write("[2026-11-29T21:52:23.000001+0000] gpu01:%d:%d [0] NCCL INFO rank %d second\n"
                                % (i, i, i))
            t0 = time.monotonic()
            rc, err, fds, rss = run_sampled(cmd)
            wall = time.monotonic() - t0
            if rc != 0:
                sys.exit("shipper exited %d: %s" % (rc, err[-2000:]))
            print("all tracked, run %d: %d files, peak %d open fds, peak RSS %.1f MiB, wall %.1f s"
                  % (rnd + 1, n, fds, rss / 1024, wall))
        lines = loki.store_lines("nccl")
        print("stored %d lines for %d written, %d duplicates" % (len(lines), 2 * n, len(lines) - len(set(lines))))
        # A user's growing lines without newline: 300 of 250 KiB (once 90 MB of RSS).
        long_job = w + "/nccl/4343"
        os.makedirs(long_job)
        os.chown(long_job, 65534, 65534)
        for i in range(300):
            p = long_job + "/0.gpu01.%d.log" % i
            with open(p, "w") as f:
                f.write("%03d" % i + "y" * (250 * 1024 - 3))
            os.chown(p, 65534, 65534)
        for label, bounds in (("nccl_long", ""), ("nccl_nocap", ", max_partial_bytes: 1GiB")):
            t0 = time.monotonic()
            rc, err, fds, rss = run_sampled(config("cfg-%s.yaml" % label, label, bounds, "nccl/4343/*.log"))
            if rc != 0:
                sys.exit("shipper exited %d: %s" % (rc, err[-2000:]))
            got = [l for l in loki.store_lines(label) if l[:3].isdigit() or (l and not l.strip("y"))]
            print("300 unterminated 250 KiB lines, max_partial_bytes %s: peak %d open fds, peak RSS %.1f MiB, "
                  "wall %.1f s; %d of %d bytes stored in %d lines"
                  % ("1GiB (as good as none)" if bounds else "8MiB (default)", fds, rss / 1024,
                     time.monotonic() - t0, sum(map(len, got)), 300 * 250 * 1024, len(got)))
    finally:
        loki.close()
        shutil.rmtree(w, ignore_errors=True)


if __name__ == "__main__":
    main()
