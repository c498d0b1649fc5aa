#!/usr/bin/env bats
# Three jobs share the node, each given its own GPU by Slurm (GRES over fixture device files and
# a fixture /proc/driver/nvidia): every kernel record goes to the job it concerns.

load helpers

setup() {
    jt_write_default_setup
    jt_write_plugstack
    resume_node || true
    ids=()
}

teardown() {
    release_jobs "${ids[@]}"
    [ -s "$D/shipper.pid" ] && kill -CONT "$(cat "$D/shipper.pid")" 2>/dev/null || true
}

entries() {  # LogQL -> one line per entry: "<line>\t<metadata as k=v,...>"
    loki_query "$1" | /usr/bin/python3 -c '
import json, sys
for r in json.load(sys.stdin)["data"]["result"]:
    meta = ",".join(f"{k}={v}" for k, v in sorted(r["stream"].items()))
    for _, line, *rest in r["values"]:
        sm = rest[0] if rest else {}
        print(line + "\t" + meta + "," + ",".join(f"{k}={v}" for k, v in sorted(sm.items())))'
}

wait_count() {  # LogQL, N: waits until N entries match; prints them
    local out
    for _ in $(seq 150); do
        out=$(entries "$1")
        [ "$(printf '%s' "$out" | grep -c .)" -ge "$2" ] && { printf '%s\n' "$out"; return 0; }
        sleep 0.2
    done
    echo "timed out waiting for $2 entries of $1; last: $out" >&2
    return 1
}

gpu_of() {  # job id -> the bus id the prolog recorded in its marker
    /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["devices"][0]["bdf"])' "$D/run-jobtrail/jobs/$1"
}

@test "an Xid on one job's GPU is that job's, an OOM kill its cgroup's, an mlx5 event every job's" {
    local id
    for n in 1 2 3; do
        ids+=("$(submit --gres=gpu:1 --oversubscribe -n1 --wrap "
            while [ ! -e $D/jobs/go.\$SLURM_JOB_ID ]; do sleep 0.05; done
            [ -s $D/jobs/last.\$SLURM_JOB_ID ] && cat $D/jobs/last.\$SLURM_JOB_ID > $D/kmsgfs/ctl
            exit 0")")
    done
    # The prolog writes the marker first and adds the devices after: its log's end says both are in.
    for id in "${ids[@]}"; do
        for _ in $(seq 300); do [ "$(job_state "$id")" = RUNNING ] && [ -s "$D/run-jobtrail/jobs/$id" ] && break; sleep 0.1; done
        [ "$(job_state "$id")" = RUNNING ]
        wait_log_end "$D/log/prolog/$id.log" >/dev/null
    done
    j1=${ids[0]} j2=${ids[1]} j3=${ids[2]}
    # One assignment each: a failed lookup must fail the test here, not as an empty bus id later.
    g1=$(gpu_of "$j1")
    g2=$(gpu_of "$j2")
    g3=$(gpu_of "$j3")
    i2=$(sed -n 's/.*"index":\([0-9]*\).*/\1/p' "$D/run-jobtrail/jobs/$j2")
    # Slurm gave each its own GPU, and the prolog resolved it to the driver's bus id and serial:
    # Slurm's index N (a position in gres.conf's nvidia[4-6]) is /dev/nvidia(4+N), minor 4+N.
    [ "$g1" != "$g2" ] && [ "$g2" != "$g3" ] && [ "$g1" != "$g3" ]
    for id in "$j1" "$j2" "$j3"; do
        minor=$(sed -n 's/.*"index":\([0-9]*\).*/\1/p' "$D/run-jobtrail/jobs/$id")
        gpus=$(grep -o ' gpus=[0-9]*' "$D/log/prolog/$id.log" | head -1 | cut -d= -f2)
        [ "$minor" -eq $((gpus + 4)) ]
    done
    grep -q '"serial":"16529220123' "$D/run-jobtrail/jobs/$j2"

    short2=${g2%.*}
    {
        echo "4;NVRM: Xid (PCI:$short2): 79, pid=1, GPU has fallen off the bus."
        echo "3;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/slurm/uid_0/job_$j3,task_memcg=/slurm/uid_0/job_$j3/step_batch/task_0,task=python3,pid=4040,uid=0"
        echo "3;Memory cgroup out of memory: Killed process 4040 (python3) total-vm:1048576kB, anon-rss:1000kB"
        echo "3;mlx5_core 0000:5e:00.0: mlx5_health_try_recover:327:(pid 1): health compromised - reached miss count"
    } > "$D/kmsgfs/ctl"

    # Job 1 writes an Xid on its own GPU as its last act; the shipper is stopped until the
    # epilog has removed the job's marker, so it reads the record after the job's end.
    echo "4;NVRM: Xid (PCI:${g1%.*}): 13, pid=7, name=python, Graphics SM Warp Exception" > "$D/jobs/last.$j1"
    shipper=$(cat "$D/shipper.pid")
    kill -STOP "$shipper"
    touch "$D/jobs/go.$j1"
    wait_job_done "$j1" >/dev/null
    wait_log_end "$D/log/epilog/$j1.log" >/dev/null
    [ ! -e "$D/run-jobtrail/jobs/$j1" ]
    kill -CONT "$shipper"
    touch "$D/jobs/go.$j2" "$D/jobs/go.$j3"
    wait_job_done "$j2" >/dev/null
    wait_job_done "$j3" >/dev/null
    e2=$(wait_log_end "$D/log/epilog/$j2.log")
    e3=$(wait_log_end "$D/log/epilog/$j3.log")
    e1=$D/log/epilog/$j1.log

    # In Loki: each job's own kernel records are one equality filter.
    out=$(wait_count "{job=\"kmsg\"} | slurm_job_id=\"$j2\"" 1)
    [ "$(printf '%s\n' "$out" | grep -c .)" -eq 1 ]
    [[ "$out" == *"Xid (PCI:$short2): 79"*"attribution=device"* ]]
    [[ "$out" == *"gpu=$i2,"* ]]
    [[ "$out" == *"slurm_jobs_running=$(printf '%s\n' "$j1" "$j2" "$j3" | sort | paste -sd, -)"* ]]
    out=$(wait_count "{job=\"kmsg\"} | slurm_job_id=\"$j3\"" 2)
    [ "$(printf '%s\n' "$out" | grep -c 'attribution=memcg')" -eq 2 ]
    [[ "$out" != *"Xid"* ]]
    out=$(wait_count "{job=\"kmsg\"} | slurm_job_id=\"$j1\"" 1)
    [ "$(printf '%s\n' "$out" | grep -c .)" -eq 1 ]
    [[ "$out" == *"Xid (PCI:${g1%.*}): 13"*"attribution=device"* ]]
    out=$(wait_count "{job=\"kmsg\"} |= \"health compromised\"" 1)
    [[ "$out" == *"attribution=node"* ]]
    [[ "$out" != *"slurm_job_id="* ]]
    for id in "$j1" "$j2" "$j3"; do [[ "$out" == *"slurm_jobs_running="*"$id"* ]]; done

    # In each job's epilog: whose device, in words.
    grep -q "xid=79 pci_bdf=$short2 .* owner=this_job owner_job=$j2 attribution=\"on GPU [0-9] ($g2, serial 16529220123[0-9]*), owned by this job\"" "$e2"
    grep -q "xid=79 pci_bdf=$short2 .* owner=other_job owner_job=$j2 attribution=\"on GPU [0-9] ($g2, serial [0-9]*), a GPU of another job ($j2)\"" "$e1"
    grep -q "xid=79 pci_bdf=$short2 .* owner=other_job owner_job=$j2 " "$e3"
    grep -q "kind=oom .* owner=this_job owner_job=$j3 attribution=\"in this job's memory cgroup\"" "$e3"
    grep -q "kind=oom .* owner=other_job owner_job=$j3 " "$e2"
    for e in "$e1" "$e2" "$e3"; do grep -q "kind=mlx5 .* owner=node " "$e"; done
    grep -q "xid=13 .* owner=this_job " "$e1"
    # Job 1 ended before the epilogs of 2 and 3 ran: its GPU is still known to be its.
    grep -q "xid=13 .* owner=other_job owner_job=$j1 " "$e2"

    # The operator's view of the node: the three jobs with their GPUs, whom each event hit.
    wait_count "{job=\"slurm-prolog-epilog\", job_id=~\"$j1|$j2|$j3\"} |= \" end status=\"" 6 >/dev/null
    run "$JT_CLI" --config "$D/etc/jobtrail.yaml" node "$NODE" --since 1h
    echo "$output"
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" > "$D/log/attribution-node-view.txt"
    for id in "$j1" "$j2" "$j3"; do [[ "$output" == *"$id user=root "*".. 20"* ]]; done
    [[ "$output" == *"    GPU "[0-9]" ($g2, serial 16529220123"*")"* ]]
    [[ "$output" == *"Xid 79 on $short2"*"hit job $j2: its GPU"*"($g2"* ]]
    [[ "$output" == *"oom"*"hit job $j3: its memory cgroup"* ]]
    [[ "$output" == *"mlx5"*"node-wide: jobs $(printf '%s\n' "$j1" "$j2" "$j3" | sort | paste -sd, -)"* ]]
    [[ "$output" == *"Xid 13 on ${g1%.*}"*"hit job $j1: its GPU"* ]]
    not_hit=$(printf '%s\n' "$output" | sed -n '/JOBS NOT HIT/,$p')
    [[ "$not_hit" != *"$j1:"* && "$not_hit" != *"$j2:"* && "$not_hit" != *"$j3:"* ]]
    # The same from this node's files, without Loki.
    run "$JT_CLI" --config "$D/etc/jobtrail.yaml" node "$NODE" --since 1h --local --json
    [ "$status" -eq 0 ]
    printf '%s' "$output" | /usr/bin/python3 -c "
import json, sys
v = json.load(sys.stdin)
ev = {(e['kind'], e['xid'], e['pci_bdf']): e for e in v['events']}
x = ev[('xid', 79, '$short2')]
assert x['jobs'] == ['$j2'] and x['attribution'] == 'device', ev
assert [e['jobs'] for e in v['events'] if e['kind'] == 'oom'] == [['$j3']], v['events']
assert {j['job_id'] for j in v['jobs']} >= {'$j1', '$j2', '$j3'}, v['jobs']"

    # Job 2's bundle names its own GPU's Xid as the most likely cause.
    out=$D/bundles-$j2
    mkdir -p "$out"
    run "$JT_CLI" --config "$D/etc/jobtrail.yaml" bundle "$j2" -o "$out"
    [ "$status" -eq 0 ]
    mkdir -p "$out/x" && tar --zstd -xf "$out"/lab-job"$j2"-*.tar.zst -C "$out/x"
    cause=$(sed -n '/MOST LIKELY CAUSE/,/BY NODE/p' "$(ls -d "$out"/x/*)/summary.txt")
    [[ "$cause" == *"Xid 79 on $short2"*"on this job's GPU"* ]]
}
