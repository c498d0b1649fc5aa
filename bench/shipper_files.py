#!/usr/bin/python3
"""10,000 one-line files in one job's NCCL directory (owned by a job user, as on a node), shipped
to the Loki test double by `jobtrail-shipper --once`, every file tracked (the per-directory,
per-owner and per-source caps raised past 10,000, the worst case for descriptors and memory),
then a second line in every file and a second run (a restart). Prints the peak open descriptors
(/proc/<pid>/fd, sampled) and peak RSS (VmHWM) of each run, the lines the double stored and how
many of them were duplicates. Figures, not assertions (tests/shipper has the asserting test).
    bench/shipper_files.py BUILD_DIR [FILES]      (as root: the files are given to uid 65534)"""
import json, os, shutil, subprocess, sys, tempfile, threading, time, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def run_sampled(cmd):
    """Runs cmd; returns (returncode, stderr, peak fds, peak RSS KiB), sampled every 10 ms."""
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE)
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
    _, err = p.communicate()
    t.join()
    return p.returncode, err.decode(errors="replace"), peak["fds"], peak["rss"]


def store_lines(url, job):
    with urllib.request.urlopen(url + "/-/store", timeout=60) as r:
        doc = json.loads(r.read())
    return [e[1] for s in doc if s["labels"].get("job") == job for e in s["entries"]]


def main():
    build = os.path.abspath(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
    w = tempfile.mkdtemp(prefix="jobtrail-filesbench-", dir="/var/tmp")
    loki = subprocess.Popen(["/usr/bin/python3", HERE + "/../tests/loki_double/loki_double.py", "--port-file",
                             w + "/port", "--ingestion-rate-mb", "64", "--burst-mb", "64"], stdout=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if os.path.exists(w + "/port") and os.path.getsize(w + "/port"):
                break
            time.sleep(0.05)
        with open(w + "/port") as f:
            url = "http://127.0.0.1:" + f.read()
        job = w + "/nccl/4242"
        os.makedirs(job)
        os.chown(job, 65534, 65534)
        names = [job + "/0.gpu01.%d.log" % i for i in range(n)]
        for i, p in enumerate(names):
            with open(p, "w") as f:
                f.write("[2026-11-29T21:52:22.000001+0000] gpu01:%d:%d [0] NCCL INFO rank %d first\n" % (i, i, i))
            os.chown(p, 65534, 65534)
        caps = n + 1000
        with open(w + "/cfg.yaml", "w") as f:
            f.write("""cluster: bench
node: gpu01
collector: {state_dir: %(w)s/state, run_dir: %(w)s/run}
shipper:
  loki: {url: "%(url)s"}
  metrics: ""
  sources:
    kmsg: false
    journald: {enabled: false}
    files:
      - {name: nccl, paths: ["%(w)s/nccl/*/*.log"], job: nccl, format: nccl,
         max_files: %(caps)d, max_files_per_dir: %(caps)d, max_files_per_owner: %(caps)d}
""" % {"w": w, "url": url, "caps": caps})
        cmd = [build + "/shipper/jobtrail-shipper", "--config", w + "/cfg.yaml", "--once", "--once-timeout", "600"]
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
            print("run %d: %d files tracked, peak %d open fds, peak RSS %.1f MiB, wall %.1f s"
                  % (rnd + 1, n, fds, rss / 1024, wall))
        lines = store_lines(url, "nccl")
        print("stored %d lines for %d written, %d duplicates" % (len(lines), 2 * n, len(lines) - len(set(lines))))
    finally:
        loki.terminate()
        loki.wait()
        shutil.rmtree(w, ignore_errors=True)


if __name__ == "__main__":
    main()
