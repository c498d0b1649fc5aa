#!/usr/bin/env bats
# A job's user is hostile: everything in their per-job NCCL directory is theirs to plant. These
# run real jobs as the unprivileged user jtuser, with the plugin, the collectors and the node's
# shipper as in production, and check that root's shipper reads nothing the user could not.

load helpers

setup() {
    jt_write_default_setup
    jt_write_plugstack
    resume_node || true
}

teardown() {
    scancel --user=jtuser >/dev/null 2>&1 || true
    resume_node || true
}

# Every line Loki holds for a query, one per line.
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

@test "links, hard links and FIFOs a user plants in their NCCL directory are never read by root's shipper" {
    secret=$D/root-only-secret
    echo "jobtrail-root-only-secret-$$" > "$secret"
    chmod 0600 "$secret"
    # What point 1 of the hostile-users issue did: /etc/shadow through a symlink named like an
    # NCCL file; here also a root-only file, /dev/zero, a FIFO and a hard link (if the kernel
    # lets the user make one).
    id=$(submit_as jtuser --wrap "
        d=$D/nccl/\$SLURM_JOB_ID
        ln -s /etc/shadow \$d/1.n1.78.log
        ln -s $secret \$d/2.n1.79.log
        ln -s /dev/zero \$d/3.n1.80.log
        mkfifo \$d/4.n1.81.log
        ln $secret \$d/5.n1.82.log 2>/dev/null
        echo \"[\$(date -u +%Y-%m-%dT%H:%M:%S.000000+0000)] n1:77:77 [0] NCCL WARN the user wrote this\" > \$d/0.n1.77.log
        sleep 3")
    [ "$(wait_job_done "$id")" = COMPLETED ]
    [ -L "$D/nccl/$id/1.n1.78.log" ]
    wait_line "{job=\"nccl\", job_id=\"$id\"}" "the user wrote this"
    run loki_lines "{job=\"nccl\", job_id=\"$id\"}"
    [[ "$output" =~ ^\[[-0-9T:.+]+\]\ n1:77:77\ \[0\]\ NCCL\ WARN\ the\ user\ wrote\ this$ ]]
    # nothing of the targets anywhere in Loki
    for job in nccl kmsg slurm-prolog-epilog jobtrail-shipper; do
        run loki_lines "{job=\"$job\"} |~ \"jobtrail-root-only-secret|^root:\""
        [ -z "$output" ]
    done
    # the refusals are said on the shipper's own stream, naming the file and why
    wait_line '{job="jobtrail-shipper"}' "nccl/$id/1.n1.78.log: is a symbolic link"
    wait_line '{job="jobtrail-shipper"}' "nccl/$id/4.n1.81.log: is not a regular file"
}

# The plugin in slurmstepd (root) reads the stamp <nccl_dir>/<jobid>/.jobtrail-job to decide
# whether the directory is this job's. The directory is the user's: they can replace the stamp.
# Waits until the batch step stamped job $1's NCCL directory.
wait_stamp() {
    for _ in $(seq 300); do
        [ -f "$D/nccl/$1/.jobtrail-job" ] && [ ! -L "$D/nccl/$1/.jobtrail-job" ] && return 0
        sleep 0.1
    done
    echo "job $1's NCCL directory was never stamped" >&2
    return 1
}

# The job waits for the test's go, swaps the stamp by `$1` (a shell command run in its NCCL
# directory), then launches a step, bounded, and records srun's status and the seconds it took.
submit_stamp_swap() {
    submit_as jtuser --wrap "
        d=$D/nccl/\$SLURM_JOB_ID
        for i in \$(seq 300); do [ -e \$d/go ] && break; sleep 0.1; done
        cd \$d && rm -f .jobtrail-job && $1 && cd /
        t0=\$(date +%s)
        timeout 60 srun -n1 true
        echo \"srun rc=\$? seconds=\$((\$(date +%s) - t0))\""
}

# The step's directory is a fresh one with a real stamp; the user's went aside with their plant.
assert_not_adopted() {
    local id=$1 planted_test=$2
    [ -d "$D/nccl/$id" ] && [ ! -L "$D/nccl/$id" ]
    [ -f "$D/nccl/$id/.jobtrail-job" ] && [ ! -L "$D/nccl/$id/.jobtrail-job" ]
    [ "$(stat -c %U "$D/nccl/$id/.jobtrail-job")" = root ]
    [ "$(stat -c %U "$D/nccl/$id")" = jtuser ]
    aside=$(ls -d "$D/nccl/$id.stale."* | head -1)
    [ -n "$aside" ]
    test "$planted_test" "$aside/.jobtrail-job"
}

@test "a stamp the user replaced with a FIFO: the step launches at once and the directory is not adopted" {
    id=$(submit_stamp_swap "mkfifo .jobtrail-job")
    wait_stamp "$id"
    touch "$D/nccl/$id/go"
    [ "$(wait_job_done "$id")" = COMPLETED ]
    run cat "$D/jobs/slurm-$id.out"
    # Without O_NONBLOCK root's open() waits for a writer that never comes: timeout's 124.
    [[ "$output" =~ srun\ rc=0\ seconds=([0-9]+) ]]
    [ "${BASH_REMATCH[1]}" -lt 20 ]
    assert_not_adopted "$id" -p
}

@test "a stamp the user replaced with a link to a root-only copy of it: the directory is not adopted through the link" {
    id=$(submit_stamp_swap "ln -s $D/root-only-stamp-\$SLURM_JOB_ID .jobtrail-job")
    wait_stamp "$id"
    # The link's target holds the right identity and only root can read it: following the link
    # (what root could, the user could not) would adopt the user's directory.
    install -m 0600 -o root -g root "$D/nccl/$id/.jobtrail-job" "$D/root-only-stamp-$id"
    touch "$D/nccl/$id/go"
    [ "$(wait_job_done "$id")" = COMPLETED ]
    run cat "$D/jobs/slurm-$id.out"
    [[ "$output" =~ srun\ rc=0\ seconds=([0-9]+) ]]
    [ "${BASH_REMATCH[1]}" -lt 20 ]
    assert_not_adopted "$id" -L
    [ "$(readlink "$(ls -d "$D/nccl/$id.stale."* | head -1)/.jobtrail-job")" = "$D/root-only-stamp-$id" ]
    rm -f "$D/root-only-stamp-$id"
}
