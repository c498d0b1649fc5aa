#!/usr/bin/env python3
"""The fleet bench's load: for SECONDS, on every node a kernel trickle (a record a second, a
warning every 10 s, through the node's kmsg fixture), two NCCL ranks at WARN (a header, then a
warning every 5 s), and on the TRACE node two ranks at TRACE (LINES_PER_S lines a second each).
Prints what it wrote.   fleet_load.py W JOB SECONDS TRACE_NODE LINES_PER_S NODE..."""
import os, sys, time

w, job, seconds, trace_node, rate = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], int(sys.argv[5])
nodes = sys.argv[6:]
ctl = {n: open("%s/n/%s/kmsgfs/ctl" % (w, n), "w", buffering=1) for n in nodes}
nccl = {}
for i, n in enumerate(nodes):
    for rank in range(2):
        pid = 10000 + 2 * i + rank
        f = open("%s/n/%s/log/nccl/%s/0.%s.%d.log" % (w, n, job, n, pid), "w", buffering=1 << 16)
        f.write("NCCL version 2.21.5+cuda12.4\n")
        nccl[(n, rank)] = (f, pid)
stamp = lambda: time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + ".%06d+0000" % (time.time_ns() // 1000 % 1000000)
t0 = time.monotonic()
tick = 0
lines = kmsg = 0
while time.monotonic() - t0 < seconds:
    tick += 1
    for n in nodes:
        ctl[n].write("6;eth0: link ok tick %d\n" % tick)
        kmsg += 1
        if tick % 10 == 0:
            ctl[n].write("4;mlx5_core 0000:5e:00.0: mlx5_cmd_out_err:838: QUERY_VPORT_COUNTER(0x770) op_mod(0x0) "
                         "failed, status bad parameter(0x3), syndrome (0x5e5e), err(-22)\n")
            kmsg += 1
        if tick % 5 == 0:
            for rank in range(2):
                f, pid = nccl[(n, rank)]
                f.write("\n[%s] %s:%d:%d [%d] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
                        "with status=12 tick %d\n" % (stamp(), n, pid, pid + 7, rank, tick))
                f.flush()
                lines += 1
    # The TRACE node's ranks, spread over the second.
    end = t0 + tick
    per_slice = max(1, rate // 10)
    for s in range(10):
        if trace_node in nodes:
            for rank in range(2):
                f, pid = nccl[(trace_node, rank)]
                ts = stamp()
                f.write("".join("[%s] %s:%d:%d [%d] NCCL TRACE ring 3 send to 1 via NET/IB/0 chunk %d step %d size "
                                "524288 tick %d\n" % (ts, trace_node, pid, pid + 7, rank, s, k, tick)
                                for k in range(per_slice)))
                f.flush()
                lines += per_slice
        time.sleep(max(0, t0 + tick - 1 + (s + 1) / 10 - time.monotonic()))
for f, _ in nccl.values():
    f.close()
print("load: %d s, %d kernel records, %d NCCL lines (TRACE node %s at %d lines/s a rank)" %
      (seconds, kmsg, lines, trace_node, rate))
