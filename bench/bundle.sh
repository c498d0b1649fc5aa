#!/usr/bin/env bash
# The bundle of one job from the Loki test double: wall time, lines per second and peak RSS of
# `jobtrail bundle`, and the split_queries_by_interval pieces it cost Loki. Three cases:
#   default   job 101, a tenth of LINES, its default window (found from its records)
#   45d       the same job with `--start 45d`, as an operator widening the window would
#   full      job 102 with LINES lines (memory should not grow with the job)
# The double charges SPLIT_COST_MS (default 20) per 1 h piece of each query, 32 pieces of the
# tenant at a time, as a real Loki splits and runs a long query; SPLIT_COST_MS=0 turns that off.
# Figures, not assertions. Most of the wall time is the Python double answering, not jobtrail:
# the CPU time of jobtrail itself is printed too.
#   bench/bundle.sh BUILD_DIR [LINES] [NODES]
set -euo pipefail
B=$(cd "${1:?build dir}" && pwd)
N=${2:-1000000}
K=${3:-8}
COST=${SPLIT_COST_MS:-20}
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d /var/tmp/jobtrail-bundlebench-XXXXXX)
trap 'kill "${LOKI:-}" 2>/dev/null || true; rm -rf "$W"' EXIT
read -r LOKI URL < <(/usr/bin/python3 "$HERE/../tests/support/jtsupport.py" loki-double "$W" --ingestion-rate-mb 100000 \
  --burst-mb 100000 --per-stream-rate-mb 100000 --per-stream-burst-mb 100000 --max-streams 100000 \
  --split-cost-ms "$COST")
# The cluster the loader labels its streams with, as a site's CLI config names its own.
printf 'cluster: bench\n' > "$W/jobtrail.yaml"
pieces() { curl -s "$URL/-/stats" | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["split_pieces"])'; }
/usr/bin/python3 "$HERE/bundle_load.py" "$URL" 101 "$((N / 10))" "$K"
/usr/bin/python3 "$HERE/bundle_load.py" "$URL" 102 "$N" "$K"
for spec in "default 101" "45d 101 --start 45d" "full 102"; do
  set -- $spec
  name=$1 job=$2
  shift 2
  mkdir -p "$W/out-$name"
  p0=$(pieces)
  t0=$(date +%s%N)
  /usr/bin/time -f "%U %S %M" -o "$W/time" "$B/cli/jobtrail" --config "$W/jobtrail.yaml" --loki-url "$URL" \
    bundle "$job" "$@" -o "$W/out-$name" >/dev/null
  t1=$(date +%s%N)
  p1=$(pieces)
  read -r user sys rss < "$W/time"
  lines=$(tar --zstd -xOf "$W"/out-"$name"/*.tar.zst --wildcards '*/timeline.txt' | wc -l)
  size=$(stat -c %s "$W"/out-"$name"/*.tar.zst)
  awk -v name="$name" -v job="$job" -v n="$lines" -v ns="$((t1 - t0))" -v u="$user" -v s="$sys" -v r="$rss" \
    -v z="$size" -v k="$K" -v p="$((p1 - p0))" -v c="$COST" 'BEGIN {
    wall = ns / 1e9
    printf "bundle %-7s (job %s): %d lines from %d nodes in %.1f s wall (%.0f lines/s), jobtrail CPU %.2f s, peak RSS %.1f MiB, archive %.1f MB, %d Loki split pieces at %s ms\n",
      name, job, n, k, wall, n / wall, u + s, r / 1024, z / 1e6, p, c }'
done
