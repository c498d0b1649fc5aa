#!/usr/bin/env bash
# The main job, end to end, on this machine: builds jobtrail, starts a real Slurm with jobtrail's
# SPANK plugin and its collectors as Prolog/Epilog (wrapping a sample site script) and the kmsg
# test fixture as the kernel log, submits a job with --trace-capture during which NCCL (a
# stand-in: no GPU here) warns and the "kernel" reports an Xid 79, ships it all with
# jobtrail-shipper to Loki (LOKI_URL, or else a local Loki test double), and shows what jobtrail
# recorded and the job's bundle. Run as root on Debian 12. KEEP=1 leaves the cluster running.
#
# The cluster has two nodes (scripts/slurm-cluster.sh: a slurmd and a shipper per node, each in
# its own network, UTS and mount namespaces) when this machine allows it and no LOKI_URL is given
# (the nodes' network is a bridge with no route out); else it is the single-node lab.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$(pwd)
export JOBTRAIL_SOURCE=$SRC
# JOBTRAIL_DEMO_BUILD: an existing build tree to use instead of building ./build.
export JOBTRAIL_BUILD=${JOBTRAIL_DEMO_BUILD:-$SRC/build}

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# Root: slurmd, the kmsg fixture (FUSE, with device files) and the node's namespaces. Checked
# before anything is installed, built or started.
if [ "$(id -u)" != 0 ]; then
    echo "demo.sh: run it as root: it installs packages and starts a real Slurm (slurmd, as root)" >&2
    exit 1
fi

if [ -z "${JOBTRAIL_DEMO_BUILD:-}" ]; then
    say "installing dependencies (Debian packages)"
    bash scripts/install-deps.sh
    say "building"
    cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build build -j"$(nproc)" >/dev/null
fi

# Two nodes need namespaces and a bridge; a dry unshare says whether we have them.
if [ -z "${LOKI_URL:-}" ] && [ "${JOBTRAIL_DEMO_NODES:-2}" != 1 ] &&
    unshare --net --uts --mount true 2>/dev/null && command -v ip >/dev/null; then
    MODE=cluster
    export SLURM_CLUSTER_DIR=${JOBTRAIL_DEMO_DIR:-/tmp/jobtrail-demo-cluster}
    # Its own bridge, network and port: the tests' cluster may be running beside it.
    export SLURM_CLUSTER_NODES=2 SLURM_CLUSTER_BRIDGE=jtdemo0 SLURM_CLUSTER_NET=10.231.16 SLURM_CLUSTER_CTLD_PORT=6927
    D=$SLURM_CLUSTER_DIR
    say "starting a 2-node Slurm in $D (jt01, jt02: one slurmd and one jobtrail-shipper per node)"
    tests/integration/cluster/cluster.sh start
    trap '[ "${KEEP:-0}" = 1 ] || tests/integration/cluster/cluster.sh stop >/dev/null 2>&1' EXIT
    # shellcheck source=../tests/integration/cluster/cluster.bash
    source tests/integration/cluster/cluster.bash
    NODES=$CLUSTER_NODES_LIST
    XID_NODE=jt02
    LOKI=$CLUSTER_LOKI_URL
    logdir() { echo "$D/nodes/$1/log"; }
    nccldir() { echo "$D/nodes/$1/log/nccl"; }  # the plugin's default, in the node's namespace
    KCTL=$D/node/kmsgfs/ctl  # in a job step: the kmsg fixture of the node it runs on
    SBATCH_NODES="-N 2 --ntasks-per-node=1"
    SRUN="srun -N2 --ntasks-per-node=1"
    XID_SRUN="srun -N1 -n1 -w $XID_NODE"
else
    MODE=single
    export SLURM_LAB_DIR=${JOBTRAIL_DEMO_DIR:-/tmp/jobtrail-demo}
    D=$SLURM_LAB_DIR
    say "starting a single-node Slurm in $D with jobtrail-prolog/epilog as Prolog/Epilog"
    tests/integration/lab.sh start
    trap '[ "${KEEP:-0}" = 1 ] || tests/integration/lab.sh stop >/dev/null 2>&1' EXIT
    # shellcheck source=/dev/null
    source "$D/env.sh"
    # shellcheck source=../tests/integration/helpers.bash
    source tests/integration/helpers.bash
    NODES=$NODE
    XID_NODE=$NODE
    LOKI=$(cat "$D/loki.url")
    logdir() { echo "$D/log"; }
    nccldir() { echo "$JT_NCCL_DIR"; }  # the lab's plugin's nccl_dir (helpers.bash)
    KCTL=$D/kmsgfs/ctl
    SBATCH_NODES="-n 2"
    SRUN="srun -n2"
    XID_SRUN=
fi
sinfo

say "submitting a job with --trace-capture=INFO; NCCL warns and the kernel log (fixture) of $XID_NODE reports an Xid 79"
mkdir -p "$D/jobs"
cat > "$D/jobs/train.sh" <<JOB
#!/bin/sh
echo "training step 1 on \$(hostname) (nodes \$SLURM_JOB_NODELIST): NCCL_DEBUG=\$NCCL_DEBUG NCCL_DEBUG_FILE=\$NCCL_DEBUG_FILE"
$SRUN $D/bin/fake-nccl --warn "NET/IB : Got completion from peer 10.0.0.2<54321> with status=12 opcode=0 len=0 vendor err 129"
$XID_SRUN sh -c "printf '%s\\n' \"4;NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\" \\
    ' SUBSYSTEM=pci' ' DEVICE=+pci:0000:18:00.0' > $KCTL"
echo "training step 2: CUDA error: unspecified launch failure" >&2
exit 1
JOB
# shellcheck disable=SC2086
id=$(sbatch --parsable $SBATCH_NODES --trace-capture=INFO -D "$D/jobs" -o "$D/jobs/slurm-%j.out" "$D/jobs/train.sh")
echo "job $id submitted"
echo "job $id: $(wait_job_done "$id")"
for n in $NODES; do
    p=$(logdir "$n")/prolog/$id.log
    e=$(logdir "$n")/epilog/$id.log
    for f in "$p" "$e"; do
        for _ in $(seq 600); do [ -f "$f" ] && grep -q ' end status=' "$f" && break; sleep 0.1; done
    done
    say "$n: prolog log $p"
    grep -vE ' kmsg-context ' "$p"
    say "$n: epilog log $e (kernel records and events)"
    grep -E ' (meta job_id=|meta job_exit=|stdout\[|kmsg |kmsg-dict |kmsg-lost |event |event\[summary\] |end )' "$e"
done
e=$(logdir "$XID_NODE")/epilog/$id.log
say "what broke on $XID_NODE (from its epilog's event summary)"
grep ' event severity=' "$e" | sed -E 's/.* event (severity=[a-z]+) kind=([a-z]+) (xid=[0-9]+)? ?(pci_bdf=[^ ]+)?.* meaning="([^"]*)" action="([^"]*)".*/\1 \2 \3 \4\n    \5\n    action: \6/'
say "NCCL debug files of the job (one per process, NCCL_DEBUG=INFO with UTC-offset timestamps)"
for n in $NODES; do
    for f in "$(nccldir "$n")/$id"/*.log; do echo "--- $n: $f"; cat "$f"; done
done
say "shipped by jobtrail-shipper to Loki ($LOKI)"
# The last day only: a Loki with max_query_length (721h by default) refuses start=0 with 400.
q() { curl -s -G "$LOKI/loki/api/v1/query_range" --data-urlencode "query=$1" \
        --data-urlencode "start=$(( ($(date +%s) - 86400) * 1000000000 ))" \
        --data-urlencode limit=5000 --data-urlencode direction=forward; }
count() { /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(len(r["values"]) for r in d["data"]["result"]))'; }
want=$((2 * $(echo "$NODES" | wc -w)))
for _ in $(seq 150); do
    [ "$(q "{job=\"slurm-prolog-epilog\", job_id=\"$id\"} |= \" end status=\"" | count)" -ge "$want" ] && break
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
for n in $NODES; do
    echo "$n prolog: $(logdir "$n")/prolog/$id.log"
    echo "$n epilog: $(logdir "$n")/epilog/$id.log"
    echo "$n NCCL:   $(nccldir "$n")/$id/"
done
echo "job output: $D/jobs/slurm-$id.out"
if [ -n "${LOKI_URL:-}" ]; then
    echo "Loki: $LOKI_URL (query {job_id=\"$id\"} there, e.g. in Grafana)"
else
    echo "Loki: none configured (set LOKI_URL=http://loki:3100 to ship to yours); the demo shipped to its local"
    echo "      Loki test double at $LOKI, and everything is on the node(s) in the files above"
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
"$JOBTRAIL_BUILD/cli/jobtrail" --config "$D/etc/jobtrail.yaml" logql "$id" --nodes "$(echo $NODES | tr ' ' ,)" | sed 's/^/  /'
echo "(demo mode: $MODE)"
exit "${rc:-0}"
