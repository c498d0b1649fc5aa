#!/usr/bin/env bash
# The README's main command in its single-node mode with no Loki of the operator's (a machine
# without namespaces, or JOBTRAIL_DEMO_NODES=1): the demo ships to the local Loki double it
# starts, bundles from it, and with KEEP=1 leaves the lab (Slurm, shipper, double) running.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
D=${JOBTRAIL_DEMO_DIR:?}
export SLURM_LAB_DIR=$D JOBTRAIL_SOURCE=$src JOBTRAIL_BUILD=${JOBTRAIL_DEMO_BUILD:?}
trap '"$src/tests/integration/lab.sh" stop >/dev/null 2>&1 || true' EXIT
rc=0
(cd "$src" && env -u LOKI_URL JOBTRAIL_DEMO_NODES=1 KEEP=1 bash scripts/demo.sh) > "$D.log" 2>&1 || rc=$?
tail -n 30 "$D.log"
[ "$rc" -eq 0 ] || { echo "demo with JOBTRAIL_DEMO_NODES=1 exited $rc"; exit 1; }
grep -q "demo mode: single" "$D.log"
grep -q "\[fatal\] Xid 79" "$D.log"
grep -q "^Loki: none configured" "$D.log"
ls "$D"/bundles/*-job*.tar.zst > /dev/null
# KEEP=1: the lab is still up after the demo, its Slurm answering and its double holding the job.
# shellcheck source=/dev/null
source "$D/env.sh"
scontrol ping > "$D.ping" 2>&1 || true
grep -q "is UP" "$D.ping" || { echo "KEEP=1: the lab's slurmctld is not up after the demo"; exit 1; }
/usr/bin/python3 - "$(cat "$D/loki.url")" <<'PY'
import json, sys, urllib.request
store = json.load(urllib.request.urlopen(sys.argv[1] + "/-/store"))
lines = [e[1] for s in store for e in s["entries"] if s["labels"].get("job") == "nccl"]
assert sum("NCCL WARN NET/IB : Got completion from peer" in l for l in lines) >= 1, lines[:5]
kmsg = [e[1] for s in store for e in s["entries"] if s["labels"].get("job") == "kmsg" and "Xid" in e[1]]
assert len([l for l in kmsg if ": 79," in l]) == 1, kmsg
print("single-node demo, KEEP=1: the lab up after it, %d NCCL lines and the Xid in its double" % len(lines))
PY
