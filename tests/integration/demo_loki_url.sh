#!/usr/bin/env bash
# The README's main command as an operator with a Loki runs it: `LOKI_URL=... bash scripts/demo.sh`.
# The Loki test double plays the operator's Loki; the demo (its single-node lab, on ports of its
# own beside the tests' labs) must ship there, find the job's lines there and bundle from there.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'kill "$loki" 2>/dev/null || true; rm -rf "$work"' EXIT
/usr/bin/python3 "$src/tests/loki_double/loki_double.py" --port-file "$work/port" > "$work/loki.log" 2>&1 &
loki=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
url=http://127.0.0.1:$(cat "$work/port")
rc=0
(cd "$src" && LOKI_URL=$url bash scripts/demo.sh) > "$work/demo.log" 2>&1 || rc=$?
tail -n 30 "$work/demo.log"
[ "$rc" -eq 0 ] || { echo "demo with LOKI_URL exited $rc"; exit 1; }
grep -q "demo mode: single" "$work/demo.log"
grep -q "\[fatal\] Xid 79" "$work/demo.log"
grep -q "^Loki: $url " "$work/demo.log"
# What reached "the operator's Loki": the job's NCCL warning and its Xid, each once.
/usr/bin/python3 - "$url" <<'PY'
import json, sys, urllib.request
store = json.load(urllib.request.urlopen(sys.argv[1] + "/-/store"))
lines = [e[1] for s in store for e in s["entries"] if s["labels"].get("job") == "nccl"]
assert sum("NCCL WARN NET/IB : Got completion from peer" in l for l in lines) >= 1, lines[:5]
kmsg = [e[1] for s in store for e in s["entries"] if s["labels"].get("job") == "kmsg" and "Xid" in e[1]]
assert len([l for l in kmsg if ": 79," in l]) == 1, kmsg
print("demo with LOKI_URL: %d NCCL lines and the Xid in the given Loki" % len(lines))
PY
