#!/usr/bin/python3
"""Loads a job of N lines across K nodes into a Loki (the double) as the shipper would have:
prolog/epilog records, 8 NCCL files per node, and a kernel log per node with one Xid.
  bundle_load.py URL JOB_ID LINES NODES"""
import json, os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../tests/support"))
from jtsupport import JSON, http  # noqa: E402

url, job, lines, nodes = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
NS = 1_000_000_000
t0 = time.time_ns() - 2 * 3600 * NS


def push(stream, values):
    for k in range(0, len(values), 10000):
        body = json.dumps({"streams": [{"stream": stream, "values": values[k:k + 10000]}]}).encode()
        st, answer = http("POST", url + "/loki/api/v1/push", body, JSON, timeout=600)
        assert st == 204, answer


per_file = lines // (nodes * 8)
span = 3600 * NS
for n in range(nodes):
    node = "gpu%02d" % (n + 1)
    base = {"cluster": "bench", "node": node}
    push(dict(base, job="slurm-prolog-epilog", job_id=job, service_name="slurm-prolog-epilog"),
         [[str(t0), "prolog meta user=bench"], [str(t0 + span), "epilog end status=0 duration_ms=10"]])
    for rank in range(8):
        pid = 1000 + rank
        push(dict(base, job="nccl", job_id=job, service_name="nccl", file="0.%s.%d.log" % (node, pid), step="0", pid=str(pid)),
             [[str(t0 + 1 + i * (span // per_file) + rank), "[2026-11-29T21:52:22.%06d+0000] %s:%d:%d [%d] NCCL INFO Channel %02d/32 : 0[%d] -> 1[%d] via P2P/IPC/read comm 0x55d0 seq %07d"
               % (i % 1000000, node, pid, pid, rank, i % 32, rank, rank, i)] for i in range(per_file)])
    k = [[str(t0 + i * NS), "kernel line %d" % i] for i in range(100)]
    if n == 3:
        k.append([str(t0 + 1800 * NS), "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus."])
    push(dict(base, job="kmsg", priority="info", service_name="kmsg"), sorted(k))
print("loaded %d NCCL lines + job logs and kernel logs on %d nodes" % (per_file * 8 * nodes, nodes))
