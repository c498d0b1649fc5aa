#!/usr/bin/env bash
# Ships a generated 1,000,000-line NCCL-style file (~150 bytes a line) to a local endpoint that
# accepts everything, with the durable spool on (as in production), and prints lines per second,
# CPU seconds per million lines and peak RSS. Figures, not assertions.
#   bench/shipper.sh BUILD_DIR [LINES]
set -euo pipefail
B=$(cd "${1:?build dir}" && pwd)
N=${2:-1000000}
W=$(mktemp -d /tmp/jobtrail-shipbench-XXXXXX)
trap 'kill $SINK 2>/dev/null || true; rm -rf "$W"' EXIT
/usr/bin/python3 "$(dirname "$0")/sink.py" "$W/port" & SINK=$!
for _ in $(seq 100); do [ -s "$W/port" ] && break; sleep 0.05; done
mkdir -p "$W/nccl/4242"
/usr/bin/python3 - "$W/nccl/4242/0.gpu01.12345.log" "$N" <<'PY'
import sys
n = int(sys.argv[2])
with open(sys.argv[1], "w") as f:
    for i in range(n):
        f.write("[2026-11-29T21:52:22.%06d+0000] gpu01:12345:12399 [3] NCCL INFO Channel %02d/32 : 0[3] -> 1[3] via P2P/IPC/read comm 0x55d0 nRanks 08 seq %07d\n" % (i % 1000000, i % 32, i))
PY
bytes=$(stat -c %s "$W/nccl/4242/0.gpu01.12345.log")
cat > "$W/cfg.yaml" <<YAML
cluster: bench
node: gpu01
collector: {state_dir: $W/state, run_dir: $W/run}
shipper:
  loki: {url: "http://127.0.0.1:$(cat "$W/port")"}
  metrics: "127.0.0.1:0"
  sources:
    kmsg: false
    files:
      - {name: nccl, paths: ["$W/nccl/*/*.log"], job: nccl, format: nccl}
YAML
t0=$(date +%s%N)
/usr/bin/time -f "%U %S %M" -o "$W/time" "$B/shipper/jobtrail-shipper" --config "$W/cfg.yaml" --once --once-timeout 600
t1=$(date +%s%N)
read -r user sys rss < "$W/time"
awk -v n="$N" -v b="$bytes" -v ns="$((t1 - t0))" -v u="$user" -v s="$sys" -v r="$rss" 'BEGIN {
    wall = ns / 1e9
    printf "shipped %d lines (%.0f MB) with the spool on\n", n, b / 1e6
    printf "  wall %.2f s, %.0f lines/s\n", wall, n / wall
    printf "  CPU %.2f s user + %.2f s sys = %.2f CPU-s per million lines\n", u, s, (u + s) * 1e6 / n
    printf "  peak RSS %.1f MiB\n", r / 1024 }'
