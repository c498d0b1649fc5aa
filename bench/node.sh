#!/usr/bin/env bash
# `jobtrail node` and `jobtrail xid` over 400 days in the Loki test double: wall time, what came
# back (jobs, events, Xids), and the pieces it cost Loki. gpu01 has 400 days of history, gpu02
# 30 (a new node, or a Loki that keeps 30 days), each (bench/node_load.py) a job every 6 h, 200
# kernel lines a day and an Xid in one job of ten. Cases:
#   node gpu01 24h      the default window
#   node gpu01 400d     `node gpu01 --since 400d`, as an operator asking for everything would
#   node gpu02 400d     the same where Loki holds 30 days of the node
#   xid 400d            `xid --since 400d`, both nodes; and `--nodes gpu02`
# The double charges SPLIT_COST_MS (default 20) per 1 h piece of each query, 32 pieces of the
# tenant at a time, as a real Loki splits and runs a long query; SPLIT_COST_MS=0 turns that off.
# Figures, not assertions; run it with an older build's directory to compare.
#   bench/node.sh BUILD_DIR
set -euo pipefail
B=$(cd "${1:?build dir}" && pwd)
COST=${SPLIT_COST_MS:-20}
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d /var/tmp/jobtrail-nodebench-XXXXXX)
trap 'kill "${LOKI:-}" 2>/dev/null || true; rm -rf "$W"' EXIT
read -r LOKI URL < <(/usr/bin/python3 "$HERE/../tests/support/jtsupport.py" loki-double "$W" --ingestion-rate-mb 100000 \
  --burst-mb 100000 --per-stream-rate-mb 100000 --per-stream-burst-mb 100000 --max-streams 100000 \
  --reject-old-samples-max-age $((401 * 86400)) --split-cost-ms "$COST")
printf 'cluster: bench\n' > "$W/jobtrail.yaml"
pieces() { curl -s "$URL/-/stats" | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["split_pieces"])'; }
/usr/bin/python3 "$HERE/node_load.py" "$URL" gpu01 400
/usr/bin/python3 "$HERE/node_load.py" "$URL" gpu02 30
for spec in "node 24h gpu01" "node 400d gpu01" "node 400d gpu02" "xid 400d" "xid 400d --nodes gpu02"; do
  set -- $spec
  p0=$(pieces)
  t0=$(date +%s%N)
  if [ "$1" = node ]; then
    "$B/cli/jobtrail" --config "$W/jobtrail.yaml" --loki-url "$URL" --json node "$3" --since "$2" > "$W/out" || true
    got=$(/usr/bin/python3 -c 'import json, sys; v = json.load(open(sys.argv[1])); print("%d jobs, %d events" % (len(v["jobs"]), len(v["events"])))' "$W/out")
  else
    "$B/cli/jobtrail" --config "$W/jobtrail.yaml" --loki-url "$URL" --json xid --since "$2" "${@:3}" > "$W/out" || true
    got=$(/usr/bin/python3 -c 'import json, sys; print("%d Xids" % sum(r["count"] for r in json.load(open(sys.argv[1]))))' "$W/out")
  fi
  t1=$(date +%s%N)
  p1=$(pieces)
  awk -v what="$1 --since $2 ${*:3}" -v got="$got" -v ns="$((t1 - t0))" -v p="$((p1 - p0))" -v c="$COST" 'BEGIN {
    printf "%-32s %6.1f s wall, %s, %d Loki split pieces at %s ms\n", what, ns / 1e9, got, p, c }'
done
