#!/usr/bin/env bash
# A fleet against one Loki (the test double, with etc/loki/values.yaml's limits): NODES shippers
# (default 64; node names gpu001...), one process each with its own kmsg fixture, spool and job
# logs, under a realistic mixed load for SECONDS (default 60): a kernel trickle, the real
# collectors' prolog and epilog logs of one job on every node, NCCL at WARN on every node and at
# TRACE on gpu001. Prints pushes/s, active streams, bytes/s, each shipper's CPU and RSS, and the
# time and memory of `jobtrail bundle` of that NODES-node job. Figures, not assertions.
#   bench/fleet.sh BUILD_DIR [NODES] [SECONDS]        (root: FUSE mounts)
set -euo pipefail
B=$(cd "${1:?build dir}" && pwd)
N=${2:-64}
SECS=${3:-60}
RATE=${TRACE_LINES_PER_S:-1500}
HERE=$(cd "$(dirname "$0")" && pwd)
JOB=7000
W=$(mktemp -d /var/tmp/jobtrail-fleet-XXXXXX)
nodes=()
for i in $(seq "$N"); do nodes+=("$(printf 'gpu%03d' "$i")"); done
nodelist=$(printf 'gpu[001-%03d]' "$N")
cleanup() {
  for n in "${nodes[@]}"; do
    [ -s "$W/n/$n/shipper.pid" ] && kill "$(cat "$W/n/$n/shipper.pid")" 2>/dev/null || true
  done
  sleep 0.5
  for n in "${nodes[@]}"; do
    mountpoint -q "$W/n/$n/kmsgfs" && umount -l "$W/n/$n/kmsgfs" 2>/dev/null || true
    [ -s "$W/n/$n/kmsgfs.pid" ] && kill "$(cat "$W/n/$n/kmsgfs.pid")" 2>/dev/null || true
  done
  [ -n "${LOKI:-}" ] && kill "$LOKI" 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
read -r LOKI URL < <(/usr/bin/python3 "$HERE/../tests/support/jtsupport.py" loki-double "$W" --ingestion-rate-mb 64 \
  --burst-mb 128 --per-stream-rate-mb 8 --per-stream-burst-mb 32 --max-streams 50000)
stats() { curl -s "$URL/-/stats"; }

# Every node: its kmsg fixture, config, the real prolog of the job, its shipper.
for n in "${nodes[@]}"; do
  d=$W/n/$n
  mkdir -p "$d"/{log/prolog,log/epilog,log/nccl/$JOB,state,run,kmsgfs}
  "$B/tests/fixtures/kmsgfs/kmsgfs" "$d/kmsgfs" --ring-bytes 1048576 >/dev/null 2>&1 </dev/null &
  echo $! > "$d/kmsgfs.pid"
done
for n in "${nodes[@]}"; do
  d=$W/n/$n
  for _ in $(seq 100); do [ -e "$d/kmsgfs/kmsg" ] && break; sleep 0.05; done
  echo "6;Linux version 6.1.0 (fleet bench $n)" > "$d/kmsgfs/ctl"
  cat > "$d/cfg.yaml" <<YAML
cluster: fleet
node: $n
collector: {log_dir: $d/log, state_dir: $d/state, run_dir: $d/run, kmsg: $d/kmsgfs/kmsg, nccl_dir: $d/log/nccl}
shipper:
  loki: {url: "$URL"}
  metrics: ""
  sources:
    files:
      - {name: prolog-epilog, paths: ["$d/log/{prolog,epilog}/*.log"], job: slurm-prolog-epilog, format: joblog}
      - {name: nccl, paths: ["$d/log/nccl/*/*.log"], job: nccl, format: nccl}
    journald: {enabled: false}
YAML
done
collector() {  # prolog|epilog node
  local d=$W/n/$2
  env -i PATH=/usr/bin:/bin SLURM_JOB_ID=$JOB SLURMD_NODENAME="$2" SLURM_JOB_NODELIST="$nodelist" \
    SLURM_NODELIST="$nodelist" SLURM_JOB_USER=root SLURM_JOB_UID=0 SLURM_JOB_GID=0 SLURM_JOB_PARTITION=gpu \
    SLURM_CLUSTER_NAME=fleet SLURM_JOB_NUM_NODES="$N" SLURM_SCRIPT_CONTEXT="${1}_slurmd" \
    "$B/$1/jobtrail-$1" --config "$d/cfg.yaml" >/dev/null 2>&1 || echo "$1 on $2 failed" >&2
}
for n in "${nodes[@]}"; do collector prolog "$n"; done
for n in "${nodes[@]}"; do
  setsid "$B/shipper/jobtrail-shipper" --config "$W/n/$n/cfg.yaml" >"$W/n/$n/shipper.log" 2>&1 </dev/null &
  echo $! > "$W/n/$n/shipper.pid"
done
sleep 2
cpu_ticks() { awk '{print $14 + $15}' "/proc/$(cat "$W/n/$1/shipper.pid")/stat"; }
declare -A c0
for n in "${nodes[@]}"; do c0[$n]=$(cpu_ticks "$n"); done
s0=$(stats); t0=$(date +%s%N)
/usr/bin/python3 "$HERE/fleet_load.py" "$W" "$JOB" "$SECS" gpu001 "$RATE" "${nodes[@]}"
t1=$(date +%s%N); s1=$(stats)
hz=$(getconf CLK_TCK)
per_node=$W/per-node.txt
for n in "${nodes[@]}"; do
  p=$(cat "$W/n/$n/shipper.pid")
  printf '%s %s %s %s\n' "$n" "$(( $(cpu_ticks "$n") - c0[$n] ))" "$(awk '/VmRSS/ {print $2}' "/proc/$p/status")" \
    "$(awk '/VmHWM/ {print $2}' "/proc/$p/status")" >> "$per_node"
done
/usr/bin/python3 - "$s0" "$s1" "$((t1 - t0))" "$hz" "$per_node" "$N" <<'PY'
import json, statistics, sys
s0, s1, ns, hz, path, n = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
secs = ns / 1e9
d = lambda k: s1.get(k, 0) - s0.get(k, 0)
print("fleet of %d shippers for %.0f s against the Loki double (values.yaml limits):" % (n, secs))
print("  pushes/s %.1f (%.2f per node), bytes/s %.0f KB (snappy protobuf), entries/s %.0f, streams %d (%.1f per node)"
      % (d("pushes") / secs, d("pushes") / secs / n, d("bytes_received") / secs / 1e3, d("entries_stored") / secs,
         s1.get("streams", 0), s1.get("streams", 0) / n))
print("  Loki answers: %s, rejected: %s, duplicates stored: %d" % (s1.get("by_status"), s1.get("rejected"), d("duplicates")))
rows = [l.split() for l in open(path)]
cpu = {r[0]: int(r[1]) / hz / secs * 100 for r in rows}
rss = {r[0]: int(r[2]) / 1024 for r in rows}
hwm = {r[0]: int(r[3]) / 1024 for r in rows}
rest = [k for k in cpu if k != "gpu001"]
if rest:
    print("  shipper CPU per node (WARN nodes): median %.2f%%, max %.2f%% of a core; RSS median %.1f MiB, max %.1f MiB (peak %.1f MiB)"
          % (statistics.median(cpu[k] for k in rest), max(cpu[k] for k in rest), statistics.median(rss[k] for k in rest),
             max(rss[k] for k in rest), max(hwm[k] for k in rest)))
print("  shipper on gpu001 (NCCL TRACE): CPU %.2f%% of a core, RSS %.1f MiB (peak %.1f MiB)" % (cpu["gpu001"], rss["gpu001"], hwm["gpu001"]))
print("  all %d shippers together: %.2f cores, %.0f MiB RSS" % (n, sum(cpu.values()) / 100, sum(rss.values())))
PY
# The job ends: every node's epilog, then the bundle once all have shipped.
for n in "${nodes[@]}"; do collector epilog "$n"; done
q='{job="slurm-prolog-epilog", job_id="'$JOB'"} |= "epilog end"'
for _ in $(seq 600); do
  got=$(curl -s -G "$URL/loki/api/v1/query_range" --data-urlencode "query=$q" --data-urlencode start=0 --data-urlencode limit=5000 |
        /usr/bin/python3 -c 'import json,sys; print(sum(len(r["values"]) for r in json.load(sys.stdin)["data"]["result"]))')
  [ "$got" -ge "$N" ] && break
  sleep 0.5
done
mkdir -p "$W/bundle"
t0=$(date +%s%N)
/usr/bin/time -f "%U %S %M" -o "$W/time" "$B/cli/jobtrail" --config /dev/null --loki-url "$URL" bundle "$JOB" \
  -o "$W/bundle" >/dev/null 2>"$W/bundle.err" || echo "(bundle exit $?: $(tail -1 "$W/bundle.err"))"
t1=$(date +%s%N)
read -r user sys rss < "$W/time"
lines=$(tar --zstd -xOf "$W"/bundle/*.tar.zst --wildcards '*/timeline.txt' | wc -l)
nn=$(tar --zstd -xOf "$W"/bundle/*.tar.zst --wildcards '*/manifest.json' | /usr/bin/python3 -c 'import json,sys; m=json.load(sys.stdin); print(len(m["job"]["nodes"]), len(m["queries"]), m["complete"])')
read -r bn bq bc <<<"$nn"
awk -v ns="$((t1 - t0))" -v u="$user" -v s="$sys" -v r="$rss" -v l="$lines" -v bn="$bn" -v bq="$bq" -v bc="$bc" 'BEGIN {
  printf "  jobtrail bundle of the %d-node job: %.1f s wall, CPU %.2f s, peak RSS %.1f MiB, %d lines, %d queries, complete=%s\n",
    bn, ns / 1e9, u + s, r / 1024, l, bq, bc }'
