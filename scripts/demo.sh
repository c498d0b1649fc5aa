#!/usr/bin/env bash
# The main job, end to end, on this machine: builds jobtrail, starts a real single-node Slurm
# with jobtrail's SPANK plugin and its collectors as Prolog/Epilog (wrapping a sample site
# script) and the kmsg test fixture as the kernel log, submits a job with --trace-capture during
# which NCCL (a stand-in: no GPU here) warns and the "kernel" reports an Xid 79, ships it all with
# jobtrail-shipper to Loki (LOKI_URL, or else a local Loki test double), and shows what jobtrail
# recorded. Run as root on Debian 12. KEEP=1 leaves the cluster running.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$(pwd)
export JOBTRAIL_SOURCE=$SRC
export JOBTRAIL_BUILD=$SRC/build
export SLURM_LAB_DIR=${JOBTRAIL_DEMO_DIR:-/tmp/jobtrail-demo}
D=$SLURM_LAB_DIR

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "installing dependencies (Debian packages)"
bash scripts/install-deps.sh
say "building"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
say "starting a single-node Slurm in $D with jobtrail-prolog/epilog as Prolog/Epilog"
tests/integration/lab.sh start
trap '[ "${KEEP:-0}" = 1 ] || tests/integration/lab.sh stop >/dev/null 2>&1' EXIT
# shellcheck source=/dev/null
source "$D/env.sh"
# shellcheck source=../tests/integration/helpers.bash
source tests/integration/helpers.bash
sinfo

say "submitting a job with --trace-capture=INFO; NCCL warns and the kernel log (fixture) reports an Xid 79"
mkdir -p "$D/jobs"
cat > "$D/jobs/train.sh" <<JOB
#!/bin/sh
#SBATCH -n 2
echo "training step 1 on \$(hostname): NCCL_DEBUG=\$NCCL_DEBUG NCCL_DEBUG_FILE=\$NCCL_DEBUG_FILE"
srun -n2 $D/bin/fake-nccl --warn "NET/IB : Got completion from peer 10.0.0.2<54321> with status=12 opcode=0 len=0 vendor err 129"
printf '%s\n' "4;NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus." \
    " SUBSYSTEM=pci" " DEVICE=+pci:0000:18:00.0" > $D/kmsgfs/ctl
echo "training step 2: CUDA error: unspecified launch failure" >&2
exit 1
JOB
id=$(sbatch --parsable --trace-capture=INFO -D "$D/jobs" -o "$D/jobs/slurm-%j.out" "$D/jobs/train.sh")
echo "job $id submitted"
echo "job $id: $(wait_job_done "$id")"
p=$(wait_log_end "$D/log/prolog/$id.log")
e=$(wait_log_end "$D/log/epilog/$id.log")

say "prolog log: $p"
grep -vE ' kmsg-context ' "$p"
say "epilog log: $e (kernel records and events)"
grep -E ' (meta job_id=|meta job_exit=|stdout\[|kmsg |kmsg-dict |kmsg-lost |event |event\[summary\] |end )' "$e"
say "what broke (from the epilog's event summary)"
grep ' event severity=' "$e" | sed -E 's/.* event (severity=[a-z]+) kind=([a-z]+) (xid=[0-9]+)? ?(pci_bdf=[^ ]+)?.* meaning="([^"]*)" action="([^"]*)".*/\1 \2 \3 \4\n    \5\n    action: \6/'
say "NCCL debug files of the job (one per process, NCCL_DEBUG=INFO with UTC-offset timestamps)"
for f in "$D/nccl/$id"/*.log; do echo "--- $f"; cat "$f"; done
say "shipped by jobtrail-shipper to Loki ($(cat "$D/loki.url"))"
# The last day only: a Loki with max_query_length (721h by default) refuses start=0 with 400.
q() { curl -s -G "$(cat "$D/loki.url")/loki/api/v1/query_range" --data-urlencode "query=$1" \
        --data-urlencode "start=$(( ($(date +%s) - 86400) * 1000000000 ))" \
        --data-urlencode limit=5000 --data-urlencode direction=forward; }
count() { /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(len(r["values"]) for r in d["data"]["result"]))'; }
for _ in $(seq 100); do
    [ "$(q "{job=\"slurm-prolog-epilog\", job_id=\"$id\"} |= \" end status=\"" | count)" -ge 2 ] && break
    sleep 0.2
done
for query in "{job=\"slurm-prolog-epilog\", job_id=\"$id\"}" "{job=\"nccl\", job_id=\"$id\"} |= \"NCCL WARN\"" \
             "{job=\"kmsg\"} |= \"Xid\" | slurm_job_id=\"$id\""; do
    printf '%-70s %s lines\n' "$query" "$(q "$query" | count)"
done
echo "the Xid as Loki has it:"
q "{job=\"kmsg\"} |= \"Xid\" | slurm_job_id=\"$id\"" | /usr/bin/python3 -c '
import json, sys
for r in json.load(sys.stdin)["data"]["result"]:
    for ts, line in r["values"]:
        print("  ", {k: v for k, v in r["stream"].items()}, line)'

say "where the logs are"
echo "prolog: $p"
echo "epilog: $e"
echo "NCCL:   $D/nccl/$id/"
echo "job output: $D/jobs/slurm-$id.out"
if [ -n "${LOKI_URL:-}" ]; then
    echo "Loki: $LOKI_URL (query {job_id=\"$id\"} there, e.g. in Grafana)"
else
    echo "Loki: none configured (set LOKI_URL=http://loki:3100 to ship to yours); the demo shipped to its local"
    echo "      Loki test double at $(cat "$D/loki.url"), and everything is on this node in the files above"
fi

say "the forensic bundle: jobtrail bundle $id"
# With LOKI_URL the bundle comes from that Loki (all the job's nodes); without, from the demo's
# Loki double, as the lab's config says.
mkdir -p "$D/bundles"
"$JOBTRAIL_BUILD/cli/jobtrail" --config "$D/etc/jobtrail.yaml" bundle "$id" -o "$D/bundles" || rc=$?
archive=$(ls -t "$D"/bundles/*-job"$id"-*.tar.zst | head -1)
echo "contents of $archive:"
tar --zstd -tf "$archive" | sed 's/^/  /'
echo "open report.html from it in a browser for the timeline; paste these into Grafana:"
"$JOBTRAIL_BUILD/cli/jobtrail" --config "$D/etc/jobtrail.yaml" logql "$id" --nodes "$NODE" | sed 's/^/  /'
exit "${rc:-0}"
