#!/usr/bin/env bats
# The node's jobtrail-shipper (started with the lab) ships a real job's prolog, epilog, NCCL and
# kernel records to Loki (the test double), labeled by job.

load helpers

setup() {
    jt_write_default_setup
    jt_write_plugstack
    resume_node || true
}

# Waits until a LogQL query returns at least N entries; prints the JSON.
wait_entries() {
    local q=$1 n=$2 out
    for _ in $(seq 150); do
        out=$(loki_query "$q")
        if [ "$(echo "$out" | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(len(r["values"]) for r in d["data"]["result"]))' 2>/dev/null || echo 0)" -ge "$n" ]; then
            echo "$out"
            return 0
        fi
        sleep 0.2
    done
    echo "timed out waiting for $n entries of $q; last answer: $out" >&2
    return 1
}

@test "a traced job's prolog, epilog, NCCL files and kernel records reach Loki under its job id" {
    id=$(submit -n2 --trace-capture=INFO --wrap "
        printf '%s\n' '4;NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.' > $D/kmsgfs/ctl
        sleep 1
        srun -n2 $D/bin/fake-nccl --warn 'NET/IB : Got completion with error 12'")
    [ "$(wait_job_done "$id")" = COMPLETED ]
    wait_log_end "$D/log/epilog/$id.log" >/dev/null
    out=$(wait_entries "{job=\"slurm-prolog-epilog\", job_id=\"$id\"} |= \" end status=\"" 2)
    [[ "$out" == *'"node": "'$NODE'"'* ]]
    [[ "$out" == *"prolog end status=0"* ]]
    [[ "$out" == *"epilog end status=0"* ]]
    out=$(wait_entries "{job=\"slurm-prolog-epilog\", job_id=\"$id\"} |= \"xid=79\"" 1)
    [[ "$out" == *"RESTART_BM"* ]]
    out=$(wait_entries "{job=\"nccl\", job_id=\"$id\"} |= \"NCCL WARN\"" 2)
    [[ "$out" == *"Got completion with error 12"* ]]
    # the kernel's record of the Xid carries the job that was running (the only one: no GPU of
    # its own named, so it concerns every job then)
    out=$(wait_entries "{job=\"kmsg\"} |= \"Xid\" | slurm_job_id=\"$id\" | attribution=\"node\"" 1)
    [[ "$out" == *"GPU has fallen off the bus"* ]]
    [[ "$out" == *'"xid": "79"'* ]]
    # the label set is the design's, nothing else
    run bash -c "curl -s '$(cat "$D/loki.url")/loki/api/v1/labels'"
    [[ "$output" == '{"status": "success", "data": ["cluster", "job", "job_id", "node", "priority", "service_name"]}' ]]
}
