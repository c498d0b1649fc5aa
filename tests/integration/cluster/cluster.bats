#!/usr/bin/env bats
# A real 4-node job (scripts/slurm-cluster.sh: one slurmd per network+UTS+mount namespace, one
# jobtrail-shipper per node, one Loki double): `jobtrail bundle` gets every node's story back from
# Loki, each line exactly once, through a shipper's kill -9 and with a shipper stopped for the job.

load cluster

setup() {
    cluster_env
    [ -n "$CLUSTER_NODES_LIST" ] || { echo "no cluster in $D (slurm_cluster_start)" >&2; return 1; }
    for n in $CLUSTER_NODES_LIST; do "$CLUSTER" shipper start "$D" "$n"; done
    scontrol update nodename="$CLUSTER_NODELIST" state=resume >/dev/null 2>&1 || true
}

# The job: on every node a kernel line of its own and two NCCL ranks at INFO (the plugin's
# --trace-capture), a pause (PAUSE_FILE: the test acts on a shipper), then on node 3 an Xid 79.
write_job() {
    cat > "$D/jobs/train-$1.sh" <<JOB
#!/bin/sh
srun -N4 -n4 sh -c 'printf "6;eth0: link check on %s for job %s\\n" "\$(hostname)" "\$SLURM_JOB_ID" > $D/node/kmsgfs/ctl'
srun -N4 -n8 $D/bin/fake-nccl --warn "NET/IB : Got completion with error 12"
for _ in \$(seq 300); do [ -e $D/jobs/go-$1 ] && break; sleep 0.1; done
srun -N1 -n1 -w jt03 sh -c "printf '%s\\n' '4;NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.' > $D/node/kmsgfs/ctl"
srun -N4 -n4 $D/bin/fake-nccl
JOB
    chmod +x "$D/jobs/train-$1.sh"
}

# Every node's job logs, NCCL files and kernel ring against the bundle: each line exactly once.
check_whole() {  # id top nodes...
    run /usr/bin/python3 "$BATS_TEST_DIRNAME/check_bundle.py" "$D" "$@"
    echo "$output"
    [ "$status" -eq 0 ]
}

wait_shipped() {  # id number-of-nodes
    wait_in_loki "{job=\"slurm-prolog-epilog\", job_id=\"$1\"} |= \"epilog end\"" "$2"
    wait_in_loki "{job=\"nccl\", job_id=\"$1\"} |= \"NCCL WARN\"" $((2 * $2))
    # Every Xid of jt03's ring (this job's and the earlier tests'), by node: the bundle's query.
    wait_in_loki "{job=\"kmsg\", node=\"jt03\"} |= \"Xid\"" "$(ring_count jt03 Xid)"
}

@test "a 4-node job's bundle: 4 nodes from the nodelist range, every line exactly once, the Xid on jt03 first" {
    write_job 1
    touch "$D/jobs/go-1"
    id=$(submit -N4 --ntasks-per-node=2 --trace-capture=INFO "$D/jobs/train-1.sh")
    [ "$(wait_job_done "$id")" = COMPLETED ]
    for n in $CLUSTER_NODES_LIST; do wait_node_log_end "$n" epilog "$id"; done
    grep -q "meta nodelist=jt\[01-04\]" "$D/nodes/jt02/log/prolog/$id.log"
    grep -q "meta trace=INFO" "$D/nodes/jt04/log/prolog/$id.log"
    wait_shipped "$id" 4
    take_bundle "$id" whole
    [ "$status" -eq 0 ]
    cause=$(sed -n '/MOST LIKELY CAUSE/,/BY NODE/p' "$top/summary.txt")
    [[ "$cause" == *"jt03"*"Xid 79"* ]]
    check_whole "$id" "$top" $CLUSTER_NODES_LIST
}

@test "a shipper killed with SIGKILL during the job and restarted: still every line exactly once" {
    write_job 2
    rm -f "$D/jobs/go-2"
    id=$(submit -N4 --ntasks-per-node=2 --trace-capture=INFO "$D/jobs/train-2.sh")
    # Mid-job: jt02's prolog and first NCCL files are written and (some) shipped.
    wait_node_log_end jt02 prolog "$id"
    for _ in $(seq 300); do [ "$(ls "$D/nodes/jt02/log/nccl/$id" 2>/dev/null | wc -l)" -ge 2 ] && break; sleep 0.1; done
    "$CLUSTER" shipper kill "$D" jt02
    touch "$D/jobs/go-2"
    sleep 1
    "$CLUSTER" shipper start "$D" jt02
    [ "$(wait_job_done "$id")" = COMPLETED ]
    for n in $CLUSTER_NODES_LIST; do wait_node_log_end "$n" epilog "$id"; done
    wait_shipped "$id" 4
    take_bundle "$id" killed
    [ "$status" -eq 0 ]
    check_whole "$id" "$top" $CLUSTER_NODES_LIST
}

@test "a node whose shipper is down for the whole job is named in a partial bundle; after it ships, whole" {
    "$CLUSTER" shipper stop "$D" jt04
    write_job 3
    touch "$D/jobs/go-3"
    id=$(submit -N4 --ntasks-per-node=2 --trace-capture=INFO "$D/jobs/train-3.sh")
    [ "$(wait_job_done "$id")" = COMPLETED ]
    for n in $CLUSTER_NODES_LIST; do wait_node_log_end "$n" epilog "$id"; done
    wait_in_loki "{job=\"slurm-prolog-epilog\", job_id=\"$id\"} |= \"epilog end\"" 3
    take_bundle "$id" before
    [ "$status" -eq 3 ]
    [[ "$output" == *"no records from node(s) jt04; the bundle is partial"* ]]
    grep -A2 "MISSING NODES" "$top/summary.txt" | grep -q "^jt04: in the job's nodelist"
    /usr/bin/python3 -c "import json; m=json.load(open('$top/manifest.json')); assert not m['complete'] and m['job']['missing_nodes']==['jt04'] and m['job']['nodes']==['jt01','jt02','jt03','jt04'], m['job']"
    check_whole "$id" "$top" jt01 jt02 jt03
    "$CLUSTER" shipper start "$D" jt04
    wait_shipped "$id" 4
    take_bundle "$id" after
    [ "$status" -eq 0 ]
    ! grep -q "MISSING NODES" "$top/summary.txt"
    check_whole "$id" "$top" $CLUSTER_NODES_LIST
}
