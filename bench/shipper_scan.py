#!/usr/bin/python3
"""How late the kernel's lines are while a file source faces what a job's user can make: on an
idle node; with FILES one-line NCCL files in one job directory (owned by a job user); with STEPS
step records in the run directory's steps/ (what the plugin writes per step, read by the job
table). Each case starts a fresh `jobtrail-shipper` daemon against the Loki test double and the
kmsg fixture (tests/fixtures/kmsgfs, never the real /dev/kmsg), waits until it is settled, then
writes 20 kernel lines 0.3 s apart and times each until the double stored it. Prints the
latency p50 / max, the shipper's CPU share meanwhile, and the lines counted. Figures, not
assertions (the tests assert the behaviour).
    bench/shipper_scan.py BUILD_DIR [FILES] [STEPS] [idle,files,steps]    (as root: the fixture is a FUSE mount)"""
import json, os, sys, time

BUILD = os.path.abspath(sys.argv[1])
os.environ["JOBTRAIL_BUILD"] = BUILD
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../tests/support"))
from jtsupport import Env  # noqa: E402

FILES = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
STEPS = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
CASES = (sys.argv[4] if len(sys.argv) > 4 else "idle,files,steps").split(",")
LINES = 20


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def shipped(env, line, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if line in env.store_lines("kmsg"):
            return True
        time.sleep(0.01)
    return False


def many_files(d):
    job = d + "/nccl/4242"
    os.makedirs(job)
    os.chown(job, 65534, 65534)
    for i in range(FILES):
        p = "%s/0.gpu01.%d.log" % (job, i)
        with open(p, "w") as f:
            f.write("[2026-11-29T21:52:22.000001+0000] gpu01:%d:%d [0] NCCL INFO rank %d\n" % (i, i, i))
        os.chown(p, 65534, 65534)
    return "%d files in one job directory" % FILES


def many_steps(d):
    steps = d + "/run/steps"
    os.makedirs(steps)
    for i in range(STEPS):
        job = str(5000 + i // 10)
        with open("%s/%s.%d" % (steps, job, i % 10), "w") as f:
            json.dump({"job_id": job, "step": str(i % 10), "start_ns": 1, "trace": "none"}, f)
    return "%d step records" % STEPS


def case(setup):
    env = Env()
    try:
        env.set_sources('{name: nccl, paths: ["%(d)s/nccl/*/*.log"], job: nccl, format: nccl}')
        what = setup(env.dir) if setup else "idle node"
        env.start()
        env.kmsg(["warm-up"])
        if not shipped(env, "warm-up", 300):
            return print("%s: the warm-up line never arrived" % what)
        time.sleep(3)  # settled: the first scans and reads done
        c0, t0 = cpu_s(env.proc.pid), time.monotonic()
        lat, lost = [], 0
        for i in range(LINES):
            line = "bench kernel line %d" % i
            start = time.monotonic()
            env.kmsg([line])
            if shipped(env, line, 60):
                lat.append(time.monotonic() - start)
            else:
                lost += 1
            time.sleep(0.3)
        cpu = (cpu_s(env.proc.pid) - c0) / (time.monotonic() - t0)
        lat.sort()
        print("%-34s kernel-line latency p50 %.3f s, max %.3f s (%d of %d lines, %d not within 60 s); shipper CPU %.0f%%"
              % (what + ":", lat[len(lat) // 2] if lat else -1, lat[-1] if lat else -1, len(lat), LINES, lost, cpu * 100))
    finally:
        env.close()


if __name__ == "__main__":
    print("build: %s" % BUILD)
    for name, setup in (("idle", None), ("files", many_files), ("steps", many_steps)):
        if name in CASES:
            case(setup)
