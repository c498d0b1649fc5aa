#!/usr/bin/env bash
# Ships a generated 1,000,000-line NCCL-style file (~150 bytes a line) to a local endpoint that
# accepts everything and prints lines per second, CPU seconds per million lines and peak RSS:
# once with the durable spool on disk (as in production), once with the spool "off" (fsync
# disabled, spool on tmpfs: what the pipeline costs without durability). Figures, not assertions.
#   bench/shipper.sh BUILD_DIR [LINES]        PERF=1 records a perf profile of the first run
set -euo pipefail
B=$(cd "${1:?build dir}" && pwd)
N=${2:-1000000}
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d /var/tmp/jobtrail-shipbench-XXXXXX)
SHM=$(mktemp -d /dev/shm/jobtrail-shipbench-XXXXXX)
trap 'kill $SINK 2>/dev/null || true; rm -rf "$W" "$SHM"' EXIT
/usr/bin/python3 "$HERE/sink.py" "$W/port" & SINK=$!
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

run() {  # NAME STATE_DIR FSYNC
  cat > "$W/cfg.yaml" <<YAML
cluster: bench
node: gpu01
collector: {state_dir: $2, run_dir: $W/run}
shipper:
  loki: {url: "http://127.0.0.1:$(cat "$W/port")"}
  spool: {fsync: $3}
  metrics: ""
  sources:
    kmsg: false
    files:
      - {name: nccl, paths: ["$W/nccl/*/*.log"], job: nccl, format: nccl}
YAML
  local cmd=("$B/shipper/jobtrail-shipper" --config "$W/cfg.yaml" --once --once-timeout 600)
  if [ -n "${PERF:-}" ]; then
    perf record -F 2000 -g -o "${PERF_OUT:-/tmp/jobtrail-shipper.perf}" "${cmd[@]}" 2>/dev/null
    echo "perf profile in ${PERF_OUT:-/tmp/jobtrail-shipper.perf}"
    exit 0
  fi
  local t0 t1 user sys rss
  t0=$(date +%s%N)
  /usr/bin/time -f "%U %S %M" -o "$W/time" "${cmd[@]}"
  t1=$(date +%s%N)
  read -r user sys rss < "$W/time"
  awk -v name="$1" -v n="$N" -v b="$bytes" -v ns="$((t1 - t0))" -v u="$user" -v s="$sys" -v r="$rss" 'BEGIN {
    wall = ns / 1e9
    printf "%s: shipped %d lines (%.0f MB)\n", name, n, b / 1e6
    printf "  wall %.2f s, %.0f lines/s\n", wall, n / wall
    printf "  CPU %.2f s user + %.2f s sys = %.2f CPU-s per million lines\n", u, s, (u + s) * 1e6 / n
    printf "  peak RSS %.1f MiB\n", r / 1024 }'
}
run "spool on (disk, fsync)" "$W/state" true
run "spool off (tmpfs, no fsync)" "$SHM/state" false
