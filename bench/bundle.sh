#!/usr/bin/env bash
# The bundle of one job with LINES lines (default 1,000,000) across NODES nodes (default 8), fetched
# from the Loki test double: wall time, lines per second and peak RSS of `jobtrail bundle`, once
# for a tenth of the job and once for all of it (memory should not grow with the job).
# Figures, not assertions. Most of the wall time is the Python double answering, not jobtrail:
# the CPU time of jobtrail itself is printed too.
#   bench/bundle.sh BUILD_DIR [LINES] [NODES]
set -euo pipefail
B=$(cd "${1:?build dir}" && pwd)
N=${2:-1000000}
K=${3:-8}
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d /var/tmp/jobtrail-bundlebench-XXXXXX)
trap 'kill "${LOKI:-}" 2>/dev/null || true; rm -rf "$W"' EXIT
read -r LOKI URL < <(/usr/bin/python3 "$HERE/../tests/support/jtsupport.py" loki-double "$W" --ingestion-rate-mb 100000 \
  --burst-mb 100000 --per-stream-rate-mb 100000 --per-stream-burst-mb 100000 --max-streams 100000)
for spec in "small $((N / 10))" "full $N"; do
  set -- $spec
  /usr/bin/python3 "$HERE/bundle_load.py" "$URL" "$1" "$2" "$K"
  mkdir -p "$W/out-$1"
  t0=$(date +%s%N)
  /usr/bin/time -f "%U %S %M" -o "$W/time" "$B/cli/jobtrail" --config /dev/null --loki-url "$URL" \
    bundle "$1" -o "$W/out-$1" >/dev/null
  t1=$(date +%s%N)
  read -r user sys rss < "$W/time"
  lines=$(tar --zstd -xOf "$W"/out-"$1"/*.tar.zst --wildcards '*/timeline.txt' | wc -l)
  size=$(stat -c %s "$W"/out-"$1"/*.tar.zst)
  awk -v name="$1" -v n="$lines" -v ns="$((t1 - t0))" -v u="$user" -v s="$sys" -v r="$rss" -v z="$size" -v k="$K" 'BEGIN {
    wall = ns / 1e9
    printf "bundle of job \"%s\": %d lines from %d nodes in %.1f s wall (%.0f lines/s), jobtrail CPU %.2f s, peak RSS %.1f MiB, archive %.1f MB\n",
      name, n, k, wall, n / wall, u + s, r / 1024, z / 1e6 }'
done
