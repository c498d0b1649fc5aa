#!/usr/bin/env bats
# The operator's 3 a.m. command on a real job: a traced two-rank job with an injected Xid goes
# through the collectors and the lab's shipper into Loki (the double); `jobtrail bundle` gets it
# back as one archive whose summary names the Xid, its node and NVIDIA's action.

load helpers

setup() {
    jt_write_default_setup
    jt_write_plugstack
    resume_node || true
}

wait_in_loki() {
    for _ in $(seq 150); do
        [ "$(loki_query "$1" | /usr/bin/python3 -c 'import json,sys; print(sum(len(r["values"]) for r in json.load(sys.stdin)["data"]["result"]))' 2>/dev/null || echo 0)" -ge "$2" ] && return 0
        sleep 0.2
    done
    return 1
}

@test "jobtrail bundle of a failed job: the Xid, its node, its action, the NCCL warnings" {
    id=$(submit -n2 --trace-capture=INFO --wrap "
        sleep 1
        printf '%s\n' '4;NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.' > $D/kmsgfs/ctl
        sleep 1
        srun -n2 $D/bin/fake-nccl --warn 'NET/IB : Got completion with error 12'")
    [ "$(wait_job_done "$id")" = COMPLETED ]
    wait_log_end "$D/log/epilog/$id.log" >/dev/null
    wait_in_loki "{job=\"slurm-prolog-epilog\", job_id=\"$id\"} |= \"epilog end\"" 1
    wait_in_loki "{job=\"nccl\", job_id=\"$id\"} |= \"NCCL WARN\"" 2
    out=$D/bundles-$id
    mkdir -p "$out"
    run "$JT_CLI" --config "$D/etc/jobtrail.yaml" bundle "$id" -o "$out"
    echo "$output"
    [ "$status" -eq 0 ]
    archive=$(ls "$out"/lab-job"$id"-*.tar.zst)
    (cd "$out" && sha256sum -c "$(basename "$archive").sha256")
    mkdir -p "$out/x" && tar --zstd -xf "$archive" -C "$out/x"
    top=$(ls -d "$out"/x/*)
    cause=$(sed -n '/MOST LIKELY CAUSE/,/BY NODE/p' "$top/summary.txt")
    [[ "$cause" == *"$NODE"*"Xid 79"* ]]
    [[ "$cause" == *"RESTART_BM"* ]]
    grep -q "NCCL WARN (x2)" "$top/summary.txt"
    grep -q "GPU has fallen off the bus" "$top/nodes/$NODE/kmsg.log"
    grep -q "epilog end status=0" "$top/nodes/$NODE/epilog.log"
    [ "$(ls "$top/nccl/$NODE" | wc -l)" -eq 2 ]  # one file per rank
    /usr/bin/python3 -c "import json,sys; m=json.load(open('$top/manifest.json')); assert m['complete'] and m['job']['nodes']==['$NODE'], m"
    # The same job from this node's files alone, as when Loki is down.
    mkdir -p "$out/local"
    run "$JT_CLI" --config "$D/etc/jobtrail.yaml" bundle "$id" --local --nccl-dir "$D/nccl" -o "$out/local"
    [ "$status" -eq 0 ]
    [[ "$output" == *"Xid 79"* ]]
    [[ "$output" == *"NCCL WARN"* ]]
}
