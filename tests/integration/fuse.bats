#!/usr/bin/env bats
# A job's user mounts a FUSE filesystem on their own NCCL directory (Debian's setuid fusermount3
# lets any user do it). Root's shipper must neither stop shipping the other jobs' NCCL files nor
# enter the mount (its daemon is the user's: it may answer EACCES, or never answer at all).

load helpers

setup() {
    jt_write_default_setup
    jt_write_plugstack
    resume_node || true
}

teardown() {
    scancel --user=jtuser >/dev/null 2>&1 || true
    for m in $(awk -v d="$JT_NCCL_DIR/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo); do
        umount -l "$m" 2>/dev/null || true
    done
    resume_node || true
}

loki_lines() {
    loki_query "$1" | /usr/bin/python3 -c 'import json,sys
for r in json.load(sys.stdin)["data"]["result"]:
    for v in r["values"]: print(v[1])'
}

wait_line() {
    local q=$1 text=$2
    for _ in $(seq 150); do
        loki_lines "$q" | grep -qF -- "$text" && return 0
        sleep 0.2
    done
    echo "never saw '$text' in $q" >&2
    return 1
}

# An NCCL WARN line in job $1's directory, as NCCL writes it.
nccl_job() {
    submit_as jtuser --wrap "
        echo \"[\$(date -u +%Y-%m-%dT%H:%M:%S.000000+0000)] n1:77:77 [0] NCCL WARN $1\" > $JT_NCCL_DIR/\$SLURM_JOB_ID/0.n1.77.log"
}

@test "a user's FUSE mount on their NCCL directory does not stop the other jobs' NCCL lines, before or after its daemon dies" {
    command -v fusermount3 >/dev/null || skip "no fusermount3 on this machine"
    [ -x "$JOBTRAIL_BUILD/tests/fixtures/kmsgfs/kmsgfs" ] || skip "the kmsgfs fixture is not built"
    # Any FUSE filesystem will do: the kmsg fixture, mounted by the user over their job's
    # directory, kept up while the job runs. A machine whose fuse.conf refuses the user's mount
    # (it asks for allow_other) cannot run this test.
    fuse=$JOBTRAIL_BUILD/tests/fixtures/kmsgfs/kmsgfs
    mounter=$(submit_as jtuser --wrap "
        d=$JT_NCCL_DIR/\$SLURM_JOB_ID
        $fuse \$d > $D/jobs/fuse.\$SLURM_JOB_ID.log 2>&1 &
        fpid=\$!
        for i in \$(seq 100); do [ -e \$d/ctl ] && break; sleep 0.1; done
        [ -e \$d/ctl ] && echo mounted > $D/jobs/fuse.\$SLURM_JOB_ID.state || echo failed > $D/jobs/fuse.\$SLURM_JOB_ID.state
        for i in \$(seq 600); do [ -e $D/jobs/go.\$SLURM_JOB_ID ] && break; sleep 0.1; done
        kill -KILL \$fpid
        sleep 2")
    for _ in $(seq 300); do [ -s "$D/jobs/fuse.$mounter.state" ] && break; sleep 0.1; done
    if [ "$(cat "$D/jobs/fuse.$mounter.state" 2>/dev/null)" != mounted ]; then
        release_jobs "$mounter"
        skip "jtuser cannot mount FUSE here: $(cat "$D/jobs/fuse.$mounter.log" 2>/dev/null)"
    fi
    # Another job's NCCL line ships while the mount is up ...
    id=$(nccl_job "shipped beside a FUSE mount")
    [ "$(wait_job_done "$id")" = COMPLETED ]
    wait_line "{job=\"nccl\", job_id=\"$id\"}" "shipped beside a FUSE mount"
    # ... the mount is refused, once, without the shipper entering it ...
    wait_line '{job="jobtrail-shipper"}' "not reading $JT_NCCL_DIR/$mounter: a mount point"
    # ... and after its daemon died (the mount then answers ENOTCONN until root unmounts it).
    release_jobs "$mounter"
    wait_job_done "$mounter"
    id=$(nccl_job "shipped after the FUSE daemon died")
    [ "$(wait_job_done "$id")" = COMPLETED ]
    wait_line "{job=\"nccl\", job_id=\"$id\"}" "shipped after the FUSE daemon died"
    run loki_lines '{job="jobtrail-shipper"} |= "a mount point"'
    [ "$(grep -c "$JT_NCCL_DIR/$mounter: a mount point" <<< "$output")" -eq 1 ]
}
