#!/usr/bin/env bash
# Prints the wall time jobtrail-prolog and jobtrail-epilog add to every job start and end, with
# no wrapped scripts and no probes: (1) on a 1 MiB kernel ring served by the kmsgfs fixture,
# (2) on this machine's real /dev/kmsg. Figures, not assertions.
#   bench/collectors.sh BUILD_DIR [RUNS]
set -euo pipefail
B=$(cd "${1:?build dir}" && pwd)
RUNS=${2:-30}
W=$(mktemp -d /tmp/jobtrail-bench-XXXXXX)
trap 'umount -l "$W/mnt" 2>/dev/null || true; kill $FS 2>/dev/null || true; rm -rf "$W"' EXIT
mkdir -p "$W/mnt"
"$B/tests/fixtures/kmsgfs/kmsgfs" "$W/mnt" --ring-bytes 1048576 >/dev/null 2>&1 &
FS=$!
for _ in $(seq 100); do [ -e "$W/mnt/ctl" ] && break; sleep 0.05; done
# Fill the ring with ~1 MiB of realistic records (plus some slack so it has wrapped).
python3 - "$W/mnt/ctl" <<'PY'
import sys
msgs = ["nvidia 0000:3b:00.0: enabling device (0000 -> 0003)",
        "mlx5_core 0000:5e:00.0: mlx5e_open_channels:2580:(pid 1234): opened 64 channels",
        "IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready",
        "EXT4-fs (nvme0n1p1): mounted filesystem with ordered data mode. Quota mode: none.",
        "audit: type=1400 audit(1700000000.123:45): apparmor=STATUS operation=profile_load"]
with open(sys.argv[1], "w") as f:
    block = []
    for i in range(16000):
        block.append("6;%s" % msgs[i % len(msgs)])
        if len(block) == 500:
            f.write("\n".join(block) + "\n"); f.flush(); block = []
PY
run_bench() {
    local label=$1 kmsg=$2
    cat > "$W/cfg.yaml" <<YAML
collector:
  log_dir: $W/log
  state_dir: $W/state
  run_dir: $W/run
  kmsg: $kmsg
  prolog: {scripts: [], probes: []}
  epilog: {scripts: [], probes: []}
YAML
    for phase in prolog epilog; do
        local times=() self=()
        for i in $(seq "$RUNS"); do
            local id=$((100000 + i))
            [ "$phase" = epilog ] || rm -f "$W/state/kmsg-marks/$id"
            local t0 t1
            t0=$(date +%s%N)
            env -i SLURM_JOB_ID=$id SLURM_JOB_USER=bench SLURMD_NODENAME=bench "$B/$phase/jobtrail-$phase" --config "$W/cfg.yaml" 2>/dev/null
            t1=$(date +%s%N)
            times+=($(( (t1 - t0) / 1000 )))
            self+=("$(tail -1 "$W/log/$phase/$id.log" | sed -n 's/.* duration_ms=\([0-9.]*\).*/\1/p')")
        done
        local wall own
        wall=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]/1000}')
        own=$(printf '%s\n' "${self[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]}')
        printf '%-28s %-7s wall median %6.1f ms (spawn baseline %5.1f ms)  own work median %6.2f ms  (n=%d)\n' \
            "$label" "$phase" "$wall" "$BASE" "$own" "$RUNS"
    done
}
records=$(python3 -c "import os;fd=os.open('$W/mnt/kmsg',os.O_RDONLY|os.O_NONBLOCK);n=0
while True:
  try: os.read(fd,8192); n+=1
  except BlockingIOError: break
  except BrokenPipeError: pass
print(n)")
echo "kernel ring: kmsgfs fixture, 1 MiB, $records records; real /dev/kmsg: $(dmesg 2>/dev/null | wc -l) records"
# Process creation alone is slow on some VMs; measure it so the figures can be read.
BASE=$(for _ in $(seq "$RUNS"); do t0=$(date +%s%N); env -i /bin/true; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000 )); done |
       sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]/1000}')
run_bench "1 MiB ring (kmsgfs fixture)" "$W/mnt/kmsg"
run_bench "real /dev/kmsg" /dev/kmsg
