#!/usr/bin/env bash
# What jobtrail-shipper costs per line, every line counted. Figures, not assertions.
#   bench/shipper.sh BUILD_DIR [LINES]      (a Release/RelWithDebInfo build without sanitizers)
# The sink (bench/sink.py) decodes every push (snappy protobuf or JSON) and ticks off each line by
# the "seq N" in it: lost and duplicated lines must both be 0.
#  - throughput: LINES (default 1,000,000) NCCL-style lines of ~150 bytes, pre-written, spread over
#    1, 8 and 64 job directories (one stream each), shipped by `--once`; CPU-s per million lines
#    (shipper user + sys), lines/s (wall, acknowledged), peak RSS, decoded push bytes per line; with
#    the spool on (disk, fdatasync: production) and "off" (spool.fsync: false on tmpfs, the
#    shipper's own no-durability setting). The sink keeps the pushes and decodes them when asked
#    for its figures, so its Python does not compete with the shipper for the CPUs.
#  - floor: bench_snappy_floor reads the same file and snappy-compresses it, three times; ratio
#    shipper/floor to their median.
#  - callgrind: instructions per line, a short run (CALLGRIND_LINES, default 100,000, 1 stream),
#    with and without what starting the shipper costs (a 1,000-line run subtracted).
#  - latency: the shipper running as a daemon on a quiet node, a writer appending lines that carry
#    their write time at 1,000 and 100,000 lines/s for LAT_SECONDS (3) into 1, 8 and 64 streams;
#    p50/p99 of written -> acknowledged by the sink, and the first line's. The sink is asked for
#    its figures only once no push has come for 1.5 s (its Python decoding would otherwise hold
#    back the acknowledgements of the last pushes), and listens with a kernel-sized backlog.
# Stages that drop NCCL lines (nccl_noise, nccl_budget) are off: every line must arrive. The
# per-stream pace (batch.max_stream_rate, for Loki's shard threshold) is off too (the sink is not
# sharded); with it, one stream carries at most 512KiB/s (~3,500 of these lines a second).
# Knobs: STREAMS="1 8 64" MODES="on off" RATES="1000 100000" LAT_SECONDS=3 CALLGRIND_LINES=100000
#        SKIP_LAT=1 SKIP_CALLGRIND=1 SKIP_TP=1
set -euo pipefail
B=$(cd "${1:?build dir}" && pwd)
N=${2:-1000000}
STREAMS=${STREAMS:-1 8 64}
MODES=${MODES:-on off}
RATES=${RATES:-1000 100000}
LAT_SECONDS=${LAT_SECONDS:-3}
CG_N=${CALLGRIND_LINES:-100000}
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d /var/tmp/jobtrail-shipbench-XXXXXX)
SHM=$(mktemp -d /dev/shm/jobtrail-shipbench-XXXXXX)
SHIPPER=""
cleanup() {
  [ -n "$SHIPPER" ] && kill "$SHIPPER" 2>/dev/null
  kill "$SINK" 2>/dev/null || true
  rm -rf "$W" "$SHM"
}
trap cleanup EXIT
/usr/bin/python3 "$HERE/sink.py" "$W/port" & SINK=$!
for _ in $(seq 100); do [ -s "$W/port" ] && break; sleep 0.05; done
URL="http://127.0.0.1:$(cat "$W/port")"

# gen DIR LINES STREAMS: files DIR/<job>/0.gpu01.<pid>.log, seq 0..LINES-1 round-robin over them.
gen() {
  /usr/bin/python3 - "$@" <<'PY'
import os, sys
d, n, s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fs = []
for j in range(s):
    os.makedirs("%s/%d" % (d, 4200 + j), exist_ok=True)
    fs.append(open("%s/%d/0.gpu01.%d.log" % (d, 4200 + j, 12345 + j), "w"))
for i in range(n):
    fs[i % s].write("[2026-11-29T21:52:22.%06d+0000] gpu01:%d:12399 [3] NCCL INFO Channel %02d/32 : 0[3] -> "
                    "1[3] via P2P/IPC/read comm 0x55d0 nRanks 08 seq %07d\n" % (i % 1000000, 12345 + i % s, i % 32, i))
for f in fs:
    f.close()
PY
}

config() {  # STATE_DIR FSYNC NCCL_DIR
  cat > "$W/cfg.yaml" <<YAML
cluster: bench
node: gpu01
collector: {state_dir: $1, run_dir: $W/run}
shipper:
  loki: {url: "$URL"}
  spool: {fsync: $2}
  batch: {max_stream_rate: 0}
  metrics: ""
  stages: {nccl_noise: false, nccl_budget: {bytes: 0}}
  sources:
    kmsg: false
    journald: {enabled: false}
    files:
      - {name: nccl, paths: ["$3/*/*.log"], job: nccl, format: nccl}
YAML
}

stats() { curl -s "$URL/stats?n=$1"; }
reset() { curl -s -X POST "$URL/reset" >/dev/null; }
state_for() { if [ "$1" = on ]; then echo "$W/state-$2"; else echo "$SHM/state-$2"; fi; }
fsync_for() { if [ "$1" = on ]; then echo true; else echo false; fi; }
label_for() { if [ "$1" = on ]; then echo "spool on (disk, fsync)"; else echo "spool off (tmpfs, no fsync)"; fi; }

echo "jobtrail-shipper benchmark: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $B"

if [ -z "${SKIP_TP:-}" ]; then
  for s in $STREAMS; do gen "$W/tp-$s" "$N" "$s"; done
  cat "$W"/tp-1/*/*.log > /dev/null  # page cache warm for the first run as for the others
  # Three times, the median the reference: one measurement of ~0.2 CPU-s moved by a third from
  # run to run on these machines, and the ratio with it.
  floors=()
  for _ in 1 2 3; do
    floor_line=$("$B/bench/bench_snappy_floor" "$W"/tp-1/*/*.log)
    floors+=("$(awk '{for (i = 1; i <= NF; ++i) if ($(i+1) == "CPU-s" && $(i+2) == "per") print $i}' <<<"$floor_line")")
    echo "$floor_line"
  done
  floor=$(printf '%s\n' "${floors[@]}" | sort -g | sed -n 2p)
  echo "floor: median of 3 = $floor CPU-s per million lines (the ratios below are to it)"
  for s in $STREAMS; do
    bytes=$(cat "$W"/tp-"$s"/*/*.log | wc -c)
    for m in $MODES; do
      config "$(state_for "$m" "tp$s")" "$(fsync_for "$m")" "$W/tp-$s"
      reset
      t0=$(date +%s%N)
      /usr/bin/time -f "%U %S %M" -o "$W/time" "$B/shipper/jobtrail-shipper" --config "$W/cfg.yaml" --once \
        --once-timeout 600 2> "$W/shipper.err" || { echo "shipper failed:"; tail -5 "$W/shipper.err"; }
      t1=$(date +%s%N)
      read -r user sys rss < "$W/time"
      st=$(stats "$N")
      /usr/bin/python3 - "$(label_for "$m")" "$s" "$N" "$bytes" "$((t1 - t0))" "$user" "$sys" "$rss" "$floor" "$st" <<'PY'
import json, sys
name, s, n, b, ns, u, sy, rss, floor, st = sys.argv[1:]
n, b, wall, u, sy, rss, floor, st = int(n), int(b), int(ns) / 1e9, float(u), float(sy), int(rss), float(floor), json.loads(st)
cpu = (u + sy) * 1e6 / n
print("throughput, %s, %s stream(s): %d lines (%.0f MB)" % (name, s, n, b / 1e6))
print("  lost %d, duplicated %d (sink saw %d lines in %d pushes)" % (st["lost"], st["dup"], st["lines"], st["pushes"]))
print("  CPU %.2f s user + %.2f s sys = %.3f CPU-s per million lines (floor ratio %.1f)" % (u, sy, cpu, cpu / floor if floor else 0))
k = max(1, st["lines"])
print("  wall %.2f s, %.0f lines/s acknowledged; peak RSS %.1f MiB" % (wall, n / wall, rss / 1024))
print("  decoded push %.1f bytes/line: structured metadata %.1f; time and line alone %.1f (what Promtail sends"
      " of each line, beside its labels once per stream and push)"
      % (st["decoded_bytes"] / k, st["metadata_bytes"] / k, st["entry_bytes"] / k))
PY
    done
  done
fi

if [ -z "${SKIP_CALLGRIND:-}" ]; then
  # Twice: CG_N lines, and 1,000 lines for what starting costs (libraries, TLS, config), so the
  # per-line figure is also given without it.
  cg_run() {  # NAME LINES -> instructions on stdout; the sink's stats in $W/cg-NAME.st
    gen "$W/cg-$1" "$2" 1
    config "$W/state-cg-$1" true "$W/cg-$1"
    reset
    valgrind --tool=callgrind --callgrind-out-file="$W/cg-$1.out" "$B/shipper/jobtrail-shipper" --config "$W/cfg.yaml" \
      --once --once-timeout 600 2> "$W/cg.err" || { echo "callgrind run failed:" >&2; tail -5 "$W/cg.err" >&2; }
    stats "$2" > "$W/cg-$1.st"
    callgrind_annotate "$W/cg-$1.out" 2>/dev/null | awk '/PROGRAM TOTALS/ && !done {gsub(",", "", $1); print $1; done = 1}'
  }
  ir=$(cg_run main "$CG_N")
  ir0=$(cg_run start 1000)
  /usr/bin/python3 -c 'import json, sys; n = int(sys.argv[2]); ir, ir0 = int(sys.argv[1] or 0), int(sys.argv[3] or 0)
st, st0 = json.load(open(sys.argv[4])), json.load(open(sys.argv[5]))
print("callgrind, spool on, 1 stream, %d lines: %.0f instructions per line (all threads, start included), "
      "%.0f without starting (a 1,000-line run subtracted); lost %d, duplicated %d"
      % (n, ir / n, (ir - ir0) / (n - 1000), st["lost"] + st0["lost"], st["dup"] + st0["dup"]))' \
    "$ir" "$CG_N" "$ir0" "$W/cg-main.st" "$W/cg-start.st"
  [ -n "${CALLGRIND_KEEP:-}" ] && cp "$W/cg-main.out" "$CALLGRIND_KEEP"
fi

if [ -z "${SKIP_LAT:-}" ]; then
  for m in $MODES; do
    for r in $RATES; do
      for s in $STREAMS; do
        d="$W/lat-$m-$r-$s"
        total=$((r * LAT_SECONDS))
        gen "$d" 0 "$s"  # the files exist, empty: the node is quiet when the shipper starts
        config "$(state_for "$m" "lat-$r-$s")" "$(fsync_for "$m")" "$d"
        reset
        "$B/shipper/jobtrail-shipper" --config "$W/cfg.yaml" 2> "$W/lat.err" & SHIPPER=$!
        sleep 2  # started, scanned, idle
        /usr/bin/python3 - "$d" "$r" "$LAT_SECONDS" "$s" <<'PY'
import glob, os, sys, time
d, rate, secs, s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
fds = [os.open(p, os.O_WRONLY | os.O_APPEND) for p in sorted(glob.glob(d + "/*/*.log"))]
total, i, t0 = int(rate * secs), 0, time.monotonic()
while i < total:
    due = min(total, int((time.monotonic() - t0) * rate) + 1)
    bufs = [[] for _ in fds]
    now = time.time_ns()
    for k in range(i, due):
        bufs[k % s].append("[2026-11-29T21:52:22.%06d+0000] gpu01:12345:12399 [3] NCCL INFO Channel %02d/32 : 0[3] "
                           "-> 1[3] via P2P/IPC/read comm 0x55d0 seq %07d t %d\n" % (k % 1000000, k % 32, k, now))
    for fd, b in zip(fds, bufs):
        if b:
            os.write(fd, "".join(b).encode())
    i = due
    time.sleep(0.001)
PY
        # Quiet first: the sink decodes when asked for its figures, and would hold back the
        # acknowledgements of pushes still coming.
        for _ in $(seq 600); do
          q=$(curl -s "$URL/quiet" | /usr/bin/python3 -c 'import json, sys; s = json.load(sys.stdin)["since_ms"]; print(int(s or 0))')
          [ "$q" -gt 1500 ] && break
          sleep 0.1
        done
        for _ in $(seq 120); do
          [ "$(stats "$total" | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["lost"])')" = 0 ] && break
          sleep 0.5
        done
        sleep 0.5  # late duplicates would show
        kill "$SHIPPER"; wait "$SHIPPER" || true; SHIPPER=""
        /usr/bin/python3 -c 'import json, sys; st = json.loads(sys.argv[5])
p50, p99 = st["lat_ms"]; f = st["first_ms"]
print("latency, %s, %s lines/s, %s stream(s): p50 %s ms, p99 %s ms, first line %s ms; lost %d, duplicated %d of %s"
      % (sys.argv[1], sys.argv[2], sys.argv[3], "%.0f" % p50 if p50 is not None else "-",
         "%.0f" % p99 if p99 is not None else "-", "%.0f" % f if f is not None else "-", st["lost"], st["dup"], sys.argv[4]))' \
          "$(label_for "$m")" "$r" "$s" "$total" "$(stats "$total")"
      done
    done
  done
fi
