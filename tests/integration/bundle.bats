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

@test "jobtrail bundle into a directory a user filled with links writes and reads none of them" {
    id=$(submit_as jtuser --wrap "sleep 1")
    [ "$(wait_job_done "$id")" = COMPLETED ]
    wait_log_end "$D/log/epilog/$id.log" >/dev/null
    secret=$D/root-only-bundle-$id
    printf 'TOPSECRET %s\n' "$id" > "$secret"
    chmod 0600 "$secret"
    # A directory every user can write (sticky, as /tmp), where an operator might run the bundle:
    # the user filled it with staging directories for the next pids and links at the archive's
    # names of the next minutes, all to a root-only file.
    out=$D/jobs/out-$id
    rm -rf "$out" "$out-theirs"  # job ids start again in a new lab
    install -d -o root -g root -m 1777 "$out"
    # The user's own directory is refused: they could swap the archive there.
    install -d -o jtuser -g jtuser -m 0755 "$out-theirs"
    run "$JT_CLI" --config "$D/etc/jobtrail.yaml" bundle "$id" --local --nccl-dir "$D/nccl" -o "$out-theirs"
    [ "$status" -eq 4 ]
    [[ "$output" == *"owned by uid $(id -u jtuser)"* ]]
    [ -z "$(ls -A "$out-theirs")" ]
    runuser -u jtuser -- bash -c '
        out=$1 id=$2 node=$3 secret=$4 last=$(cat /proc/sys/kernel/ns_last_pid) now=$(date +%s)
        for pid in $(seq $((last - 5)) $((last + 300))); do
            d=$out/.jobtrail-job$id-$pid.partial
            mkdir -p "$d/nodes/$node"
            for f in timeline.txt summary.txt manifest.json nodes/$node/prolog.log nodes/$node/epilog.log; do
                ln -s "$secret" "$d/$f"
            done
        done
        for t in $(seq $((now - 2)) $((now + 120))); do
            name=$out/lab-job$id-$(date -u -d "@$t" +%Y%m%dT%H%M%SZ).tar.zst
            ln -s "$secret" "$name" && ln -s "$secret" "$name.sha256"
        done' _ "$out" "$id" "$NODE" "$secret"
    before=$(find "$out" -mindepth 1 -printf '%P %y %l %u\n' | sort)
    run "$JT_CLI" --config "$D/etc/jobtrail.yaml" bundle "$id" --local --nccl-dir "$D/nccl" -o "$out"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(cat "$secret")" = "TOPSECRET $id" ]
    archive=$(sed -n 's/^bundle: //p' <<< "$output")
    [ -f "$archive" ] && [ ! -L "$archive" ]
    [ "$(stat -c '%a %U' "$archive")" = "600 root" ]
    (cd "$out" && sha256sum -c "$(basename "$archive").sha256")
    ! zstd -dc < "$archive" | grep -q TOPSECRET
    zstd -dc < "$archive" | tar -tvf - | awk '$1 != "-rw-------" { print; bad = 1 } END { exit bad }'
    # What the user planted is as they left it (the archive took another name than their links),
    # and nothing of the bundle's is left.
    name=$(basename "$archive")
    [[ "$name" == *-2.tar.zst ]]
    after=$(find "$out" -mindepth 1 -printf '%P %y %l %u\n' | sort)
    diff <(cat <<< "$before") <(grep -v -e "^$name " -e "^$name.sha256 " <<< "$after")
    [ "$(grep -c -e "^$name f  root$" -e "^$name.sha256 f  root$" <<< "$after")" -eq 2 ]
}
