# Shared by the multi-node tests (bats) and cluster.sh.
D=${SLURM_CLUSTER_DIR:?}
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
CLUSTER=${JOBTRAIL_SOURCE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)}/scripts/slurm-cluster.sh
# shellcheck source=../binaries.bash
source "$(dirname "${BASH_SOURCE[0]}")/../binaries.bash"

cluster_env() {
    # shellcheck disable=SC1091
    [ -s "$D/env.sh" ] && source "$D/env.sh"
    CLUSTER_NODES_LIST=${CLUSTER_NODES:-}
}
cluster_env

# One config for every node, as a site deploys it: jobtrail's default paths, which are each
# node's own in its mount namespace (/var/log/slurm, /var/lib/jobtrail, /run/jobtrail, /dev/kmsg).
cluster_write_config() {
    cluster_env
    cat > "$D/etc/jobtrail.yaml.new" <<YAML
cluster: cluster
collector:
  path: $D/bin:/usr/local/bin:/usr/bin:/bin
  kill_grace: 500ms
  kernel_context: {records: 20, max_age: 10m}
  prolog:
    scripts: ["$D/etc/prolog.d/*"]
    script_timeout: 20s
  epilog:
    scripts: ["$D/etc/epilog.d/*"]
    script_timeout: 20s
shipper:
  loki: {url: "${CLUSTER_LOKI_URL:?}", timeout: 5s}
  batch: {max_wait: 200ms}
  retry: {min_backoff: 100ms, max_backoff: 2s}
  metrics: ""
  sources:
    journald: {enabled: false}  # no journald on the test machines
YAML
    mv "$D/etc/jobtrail.yaml.new" "$D/etc/jobtrail.yaml"
}

loki_query() {
    curl -s -G "$CLUSTER_LOKI_URL/loki/api/v1/query_range" --data-urlencode "query=$1" \
        --data-urlencode "start=0" --data-urlencode "limit=5000" --data-urlencode "direction=forward"
}
loki_count() {
    loki_query "$1" | /usr/bin/python3 -c 'import json,sys; print(sum(len(r["values"]) for r in json.load(sys.stdin)["data"]["result"]))' 2>/dev/null || echo 0
}
# Waits (at most 60 s) until a LogQL query returns at least N entries.
wait_in_loki() {
    local n deadline=$((SECONDS + 60))
    while [ $SECONDS -lt $deadline ]; do
        n=$(loki_count "$1")
        [ "$n" -ge "$2" ] && return 0
        sleep 0.2
    done
    echo "timed out waiting for $2 entries of $1 (have $n)" >&2
    return 1
}

job_state() { scontrol -o show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([^ ]*\).*/\1/p'; }
wait_job_state() {  # id state...
    local id=$1 st; shift
    for _ in $(seq 600); do
        st=$(job_state "$id")
        for want in "$@"; do [ "$st" = "$want" ] && { echo "$st"; return 0; }; done
        sleep 0.1
    done
    echo "job $id still ${st:-unknown}" >&2
    return 1
}
wait_job_done() { wait_job_state "$1" COMPLETED FAILED CANCELLED TIMEOUT NODE_FAIL OUT_OF_MEMORY; }

# Waits until a node's collector log for a job has its `end` line.
wait_node_log_end() {  # node phase id
    local f=$D/nodes/$1/log/$2/$3.log
    for _ in $(seq 600); do
        [ -f "$f" ] && grep -q ' end status=' "$f" && return 0
        sleep 0.1
    done
    echo "no complete log at $f" >&2
    return 1
}

submit() {
    env -u JOBTRAIL_BUILD -u JOBTRAIL_SOURCE -u SLURM_CLUSTER_DIR \
        sbatch --parsable -D "$D/jobs" -o "$D/jobs/slurm-%j.out" "$@"
}

# Takes the bundle of a job into $D/bundles-<id>-<tag>; sets status, output, top (its folder).
take_bundle() {  # id tag
    local out=$D/bundles-$1-$2
    rm -rf "$out" && mkdir -p "$out"
    run "$JT_CLI" --config "$D/etc/jobtrail.yaml" bundle "$1" -o "$out"
    echo "$output"
    top=
    local archive
    archive=$(ls "$out"/cluster-job"$1"-*.tar.zst 2>/dev/null) || return 0
    mkdir -p "$out/x" && tar --zstd -xf "$archive" -C "$out/x"
    top=$(ls -d "$out"/x/*)
}

# How many records of a node's kernel ring (its kmsg fixture, read from the start) contain TEXT.
ring_count() {  # node text
    /usr/bin/python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
n = 0
while True:
    try:
        rec = os.read(fd, 8192)
    except BlockingIOError:
        break
    if not rec:
        break
    n += sys.argv[2].encode() in rec.split(b"\n", 1)[0]
print(n)' "$D/nodes/$1/kmsgfs/kmsg" "$2"
}
