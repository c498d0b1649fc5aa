#!/usr/bin/python3
"""Loads DAYS days of one node's history into a Loki (the double) as its shippers would have
sent it: a job every JOB_HOURS hours (its prolog's user and GPU, its epilog's end), KERNEL
kernel lines a day, and an Xid 79 on the GPU of one job in ten.
  node_load.py URL NODE DAYS [JOB_HOURS] [KERNEL]"""
import json, os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../tests/support"))
from jtsupport import JSON, http  # noqa: E402

url, node, days = sys.argv[1], sys.argv[2], int(sys.argv[3])
job_hours = int(sys.argv[4]) if len(sys.argv) > 4 else 6
kernel_per_day = int(sys.argv[5]) if len(sys.argv) > 5 else 200
NS, DAY = 1_000_000_000, 86400 * 1_000_000_000
now = time.time_ns()
t0 = now - days * DAY
base = {"cluster": "bench", "node": node}


def push(stream, values):
    for k in range(0, len(values), 10000):
        body = json.dumps({"streams": [{"stream": stream, "values": values[k:k + 10000]}]}).encode()
        st, answer = http("POST", url + "/loki/api/v1/push", body, JSON, timeout=600)
        assert st == 204, answer


kernel = [[t0 + i * (DAY // kernel_per_day), "eth0: link up %d" % i] for i in range(days * kernel_per_day)]
jobs = 0
for j, start in enumerate(range(t0 + 3600 * NS, now - 3600 * NS, job_hours * 3600 * NS)):
    job = str(100000 + j)
    push(dict(base, job="slurm-prolog-epilog", job_id=job, service_name="slurm-prolog-epilog"),
         [[str(start), "prolog meta user=bench"],
          [str(start + 1), "prolog device kind=gpu index=0 bdf=0000:3b:00.0 serial=S0"],
          [str(start + 3000 * NS), "epilog end status=0 duration_ms=10"]])
    if j % 10 == 0:
        kernel.append([start + 600 * NS, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus."])
    jobs += 1
push(dict(base, job="kmsg", priority="info", service_name="kmsg"), [[str(t), l] for t, l in sorted(kernel)])
print("loaded %s: %d jobs and %d kernel lines over %d days" % (node, jobs, len(kernel), days))
