#!/usr/bin/env bash
# Median `srun -n1 true` step launch inside one allocation, with and without spank_jobtrail.so,
# interleaved in the same run (srun and slurmstepd re-read plugstack.conf at every launch).
# Prints both medians, the difference and the ratio. Figures, not assertions.
#   bench/spank_step_launch.sh BUILD_DIR [RUNS]     (uses/starts the test cluster in BUILD_DIR/slurm-lab)
set -euo pipefail
B=$(cd "${1:?build dir}" && pwd)
RUNS=${2:-40}
SRC=$(cd "$(dirname "$0")/.." && pwd)
export JOBTRAIL_BUILD=$B JOBTRAIL_SOURCE=$SRC SLURM_LAB_DIR=$B/slurm-lab
"$SRC/tests/integration/lab.sh" start >/dev/null
D=$SLURM_LAB_DIR
# shellcheck source=/dev/null
source "$D/env.sh"
conf=$D/etc/plugstack.conf.d/jobtrail.conf
line=$(cat "$conf")
trap 'echo "$line" > "$conf"' EXIT
out=$(salloc -n1 bash -c '
    conf='"$conf"'; line="'"$line"'"
    srun -n1 true  # warm-up
    for i in $(seq '"$RUNS"'); do
        for mode in with without; do
            if [ $mode = with ]; then echo "$line" > "$conf"; else : > "$conf"; fi
            t0=$(date +%s%N); srun -n1 true; t1=$(date +%s%N)
            echo "$mode $(( (t1 - t0) / 1000 ))"
        done
    done' 2>/dev/null)
median() { grep "^$1 " <<<"$out" | awk '{print $2}' | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]/1000}'; }
with=$(median with)
without=$(median without)
echo "srun -n1 true inside one allocation, $RUNS launches each, interleaved:"
echo "  with spank_jobtrail.so:    median ${with} ms"
echo "  without the plugin:        median ${without} ms"
awk -v a="$with" -v b="$without" 'BEGIN { printf "  added per step:            %.2f ms (ratio %.3f)\n", a - b, a / b }'
