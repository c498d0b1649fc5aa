#!/usr/bin/env bats
# spank_jobtrail.so in a real Slurm: --trace-capture, the NCCL policy of every step, the per-job
# NCCL directory, and that nothing the plugin does can fail a job or drain the node.

load helpers

setup() {
    jt_write_default_setup
    jt_write_plugstack
    resume_node || true
}

teardown() {
    scancel --user=root >/dev/null 2>&1 || true
    scancel --user=jtuser >/dev/null 2>&1 || true
    jt_write_plugstack
    resume_node || true
}

# The NCCL_* and JOBTRAIL_* part of an environment dump, sorted.
policy_vars() { grep -E '^(NCCL_|JOBTRAIL_)' "$1" | sort; }

@test "sbatch without the option: the batch step gets exactly the site's policy" {
    id=$(submit --wrap "env > $D/jobs/env-\$SLURM_JOB_ID")
    [ "$(wait_job_done "$id")" = COMPLETED ]
    run policy_vars "$D/jobs/env-$id"
    [ "$output" = "JOBTRAIL_JOB_ID=$id
JOBTRAIL_STEP_ID=batch
NCCL_DEBUG=WARN
NCCL_DEBUG_FILE=$D/nccl/$id/batch.%h.%p.log
NCCL_DEBUG_TIMESTAMP_FORMAT=[%FT%T.%6f%z] 
NCCL_DEBUG_TIMESTAMP_LEVELS=ALL" ]
    # the user's TZ is not touched
    ! grep -q '^TZ=' "$D/jobs/env-$id"
    # no trace request reaches the prolog
    grep -q " meta trace=none$" "$(wait_log_end "$D/log/prolog/$id.log")"
}

@test "sbatch --trace-capture=INFO:NET,COLL: level and subsystems in every step, and the prolog/epilog see it" {
    id=$(submit -n2 --trace-capture=INFO:NET,COLL --wrap "env > $D/jobs/env-\$SLURM_JOB_ID; srun -n1 env > $D/jobs/env-step-\$SLURM_JOB_ID")
    [ "$(wait_job_done "$id")" = COMPLETED ]
    run policy_vars "$D/jobs/env-$id"
    [ "$output" = "JOBTRAIL_JOB_ID=$id
JOBTRAIL_STEP_ID=batch
JOBTRAIL_TRACE=INFO:NET,COLL
NCCL_DEBUG=INFO
NCCL_DEBUG_FILE=$D/nccl/$id/batch.%h.%p.log
NCCL_DEBUG_SUBSYS=NET,COLL
NCCL_DEBUG_TIMESTAMP_FORMAT=[%FT%T.%6f%z] 
NCCL_DEBUG_TIMESTAMP_LEVELS=ALL" ]
    grep -q "^JOBTRAIL_STEP_ID=0$" "$D/jobs/env-step-$id"
    grep -q "^NCCL_DEBUG_FILE=$D/nccl/$id/0.%h.%p.log$" "$D/jobs/env-step-$id"
    grep -q "^NCCL_DEBUG_SUBSYS=NET,COLL$" "$D/jobs/env-step-$id"
    grep -q " meta trace=INFO:NET,COLL$" "$(wait_log_end "$D/log/prolog/$id.log")"
    grep -q " meta SPANK_JOBTRAIL_TRACE=INFO:NET,COLL$" "$(wait_log_end "$D/log/epilog/$id.log")"
}

@test "srun --trace-capture as a normal user: one NCCL file per process, owned by the user, in a private per-job directory" {
    run runuser -u jtuser -- srun -n2 --trace-capture -D "$D/jobs" \
        sh -c "echo job=\$SLURM_JOB_ID; exec $D/bin/fake-nccl --warn 'NET/IB : Got completion with error 12'"
    [ "$status" -eq 0 ]
    id=$(echo "$output" | sed -n 's/^job=//p' | head -1)
    [ -n "$id" ]
    dir="$D/nccl/$id"
    [ "$(stat -c '%U %a' "$dir")" = "jtuser 700" ]
    run bash -c "ls $dir/*.log | wc -l"
    [ "$output" -eq 2 ]
    for f in "$dir"/0.*.log; do
        [ "$(stat -c %U "$f")" = jtuser ]
        [[ "$(basename "$f")" =~ ^0\.$(hostname)\.[0-9]+\.log$ ]]
        # INFO (the site's trace level) with a timestamp carrying the UTC offset on every line
        grep -qE '^\[[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\.[0-9]{6}[+-][0-9]{4}\] [^ ]+:[0-9]+:[0-9]+ \[0\] NCCL INFO Bootstrap' "$f"
        grep -q 'NCCL WARN NET/IB : Got completion with error 12' "$f"
    done
    # other users cannot read it
    ! su -s /bin/sh nobody -c "ls $dir" 2>/dev/null
}

@test "salloc --trace-capture=WARN: steps in the allocation get WARN" {
    run salloc -n1 --trace-capture=WARN srun env
    [ "$status" -eq 0 ]
    [[ "$output" == *"NCCL_DEBUG=WARN"* ]]
    [[ "$output" == *"JOBTRAIL_TRACE=WARN"* ]]
}

@test "the option can also come from the environment" {
    id=$(SLURM_SPANK__SLURM_SPANK_OPTION_jobtrail_trace_capture=INFO submit --wrap "env > $D/jobs/env-\$SLURM_JOB_ID")
    [ "$(wait_job_done "$id")" = COMPLETED ]
    grep -q "^NCCL_DEBUG=INFO$" "$D/jobs/env-$id"
    grep -q "^JOBTRAIL_TRACE=INFO$" "$D/jobs/env-$id"
}

@test "invalid values and values above the site's cap are refused at submission; no job is created" {
    before=$(scontrol -o show job 2>/dev/null | wc -l)
    run sbatch --trace-capture=TRACE --wrap true
    [ "$status" -ne 0 ]
    [[ "$output" == *"jobtrail: --trace-capture=TRACE is above this site's maximum (INFO); allowed: WARN, INFO"* ]]
    run sbatch --trace-capture=LOUD --wrap true
    [ "$status" -ne 0 ]
    [[ "$output" == *"allowed: WARN, INFO"* ]]
    run srun --trace-capture=INFO:NOSUCH true
    [ "$status" -ne 0 ]
    [[ "$output" == *"invalid NCCL subsystem 'NOSUCH'"* ]]
    run salloc --trace-capture=bogus true
    [ "$status" -ne 0 ]
    [ "$(scontrol -o show job 2>/dev/null | wc -l)" -eq "$before" ]
}

@test "a user's own NCCL_DEBUG above the cap is capped" {
    id=$(submit --export=ALL,NCCL_DEBUG=TRACE --wrap "env > $D/jobs/env-\$SLURM_JOB_ID")
    [ "$(wait_job_done "$id")" = COMPLETED ]
    grep -q "^NCCL_DEBUG=INFO$" "$D/jobs/env-$id"
}

@test "a broken configuration (unknown key, unwritable NCCL directory) neither fails jobs nor drains the node" {
    JT_PLUGSTACK_EXTRA="bogus_key=1 nccl_dir=/proc/jobtrail-nccl" jt_write_plugstack
    id=$(submit --wrap "env > $D/jobs/env-\$SLURM_JOB_ID")
    [ "$(wait_job_done "$id")" = COMPLETED ]
    run srun -n1 true
    [ "$status" -eq 0 ]
    [[ "$(node_state)" != *DRAIN* ]]
    # the step still gets the policy, without a debug file
    grep -q "^NCCL_DEBUG=WARN$" "$D/jobs/env-$id"
    ! grep -q "^NCCL_DEBUG_FILE=" "$D/jobs/env-$id"
    grep -q "\[$id.batch\] error: jobtrail: plugstack.conf: unknown plugstack key 'bogus_key'" "$D/log/slurmd.log"
    grep -q "\[$id.batch\] error: jobtrail: job $id step batch: NCCL debug files stay off" "$D/log/slurmd.log"
}

@test "a stale directory of an earlier job with the same id is not reused" {
    id=$(submit --hold --wrap "env > $D/jobs/env-\$SLURM_JOB_ID")
    mkdir -p "$D/nccl/$id"
    echo "planted" > "$D/nccl/$id/old.log"
    chown nobody "$D/nccl/$id"
    scontrol release "$id"
    [ "$(wait_job_done "$id")" = COMPLETED ]
    [ ! -e "$D/nccl/$id/old.log" ]
    ls -d "$D/nccl/$id.stale."*
    [ "$(stat -c %U "$D/nccl/$id")" = root ]
    grep -q "^NCCL_DEBUG_FILE=$D/nccl/$id/batch" "$D/jobs/env-$id"
}

@test "step records exist while the job runs and are removed by the epilog" {
    id=$(submit --trace-capture=INFO --wrap "cat $D/run-jobtrail/steps/\$SLURM_JOB_ID.batch > $D/jobs/step-\$SLURM_JOB_ID")
    [ "$(wait_job_done "$id")" = COMPLETED ]
    run /usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["job_id"], r["step"], r["trace"], r["start_ns"] > 0, r["nccl_file"])' "$D/jobs/step-$id"
    [ "$output" = "$id batch INFO True $D/nccl/$id/batch.%h.%p.log" ]
    wait_log_end "$D/log/epilog/$id.log" >/dev/null
    [ ! -e "$D/run-jobtrail/steps/$id.batch" ]
}

@test "srun and salloc without the option: steps get the site's policy" {
    env -u JOBTRAIL_BUILD -u JOBTRAIL_SOURCE srun -n1 env > "$D/jobs/env-srun"
    run bash -c "policy_vars() { grep -E '^(NCCL_|JOBTRAIL_)' \"\$1\" | sort; }; policy_vars $D/jobs/env-srun |
                 sed 's/JOBTRAIL_JOB_ID=[0-9]*/JOBTRAIL_JOB_ID=N/; s|/nccl/[0-9]*/|/nccl/N/|'"
    [ "$output" = "JOBTRAIL_JOB_ID=N
JOBTRAIL_STEP_ID=0
NCCL_DEBUG=WARN
NCCL_DEBUG_FILE=$D/nccl/N/0.%h.%p.log
NCCL_DEBUG_TIMESTAMP_FORMAT=[%FT%T.%6f%z] 
NCCL_DEBUG_TIMESTAMP_LEVELS=ALL" ]
    run salloc -n1 srun env
    [ "$status" -eq 0 ]
    [[ "$output" == *"NCCL_DEBUG=WARN"* ]]
    [[ "$output" != *"JOBTRAIL_TRACE="* ]]
    [[ "$output" != *"NCCL_DEBUG_SUBSYS="* ]]
}

@test "the plugin's policy is announced in slurmd's log at start" {
    grep -q "jobtrail: policy: nccl_debug=WARN trace_level=INFO max_level=INFO" "$D/log/slurmd.log"
}
