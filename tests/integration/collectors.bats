#!/usr/bin/env bats
# jobtrail-prolog / jobtrail-epilog as Slurm's Prolog= and Epilog=, in a real single-node Slurm.

load helpers

setup() {
    jt_write_default_setup
    resume_node || true
}

teardown() {
    scancel --user=root >/dev/null 2>&1 || true
    jt_write_default_setup
    resume_node || true
}

@test "prolog and epilog logs carry the job header, the wrapped scripts' output and their exit status" {
    id=$(submit --wrap 'echo job body')
    run wait_job_done "$id"
    [ "$output" = COMPLETED ]
    p=$(wait_log_end "$D/log/prolog/$id.log")
    e=$(wait_log_end "$D/log/epilog/$id.log")
    grep -q " meta job_id=$id$" "$p"
    grep -q " meta user=root$" "$p"
    grep -q " meta node=$NODE$" "$p"
    grep -q " meta cluster=lab$" "$p"
    grep -q " meta partition=debug$" "$p"
    grep -q " meta jobtrail_version=" "$p"
    grep -q " stdout\[10-site.sh\] site prolog says hello to job $id$" "$p"
    grep -q " stderr\[10-site.sh\] site prolog warning$" "$p"
    grep -q " status\[10-site.sh\] status=0 " "$p"
    grep -q " end status=0 " "$p"
    grep -q " meta kmsg_mark=" "$p"
    # GPU probes recorded with their output
    grep -q " probe\[nvidia-smi\] 0, 00000000:18:00.0, 1652922012345, 34$" "$p"
    grep -q " probe\[dcgmi-stats\] Successfully started recording stats for $id.$" "$p"
    grep -q " stdout\[10-site.sh\] site epilog cleaning up job $id$" "$e"
    grep -q " meta job_exit=0:0$" "$e"
    grep -q " event\[summary\] basis=\"mark seq=" "$e"
    grep -q " end status=0 " "$e"
    # every line follows the documented format
    run grep -vcE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\.[0-9]{9}Z [a-z][a-z0-9-]*(\[[^] ]+\])? ' "$p" "$e"
    [[ "$output" == *":0"*":0" ]]
    # file safety: root-owned, 0640
    [ "$(stat -c '%a %U' "$p")" = "640 root" ]
    # the job marker is gone after the epilog, the mark too
    [ ! -e "$D/run-jobtrail/jobs/$id" ]
    [ ! -e "$D/state/kmsg-marks/$id" ]
}

@test "the job marker exists while the job runs and records the trace request" {
    id=$(submit --wrap "cat $D/run-jobtrail/jobs/\$SLURM_JOB_ID > $D/jobs/marker-\$SLURM_JOB_ID.json")
    run wait_job_done "$id"
    [ "$output" = COMPLETED ]
    grep -q "\"job_id\":\"$id\"" "$D/jobs/marker-$id.json"
    grep -q '"user":"root"' "$D/jobs/marker-$id.json"
}

@test "an Xid 79 and an Xid 48 raised during the job appear in the epilog's delta and summary" {
    echo "6;before the job: not part of its delta" > "$D/kmsgfs/ctl"
    id=$(submit --wrap "printf '%s\n' \
        '4;NVRM: Xid (PCI:0000:18:00): 79, pid='\"'\"'<unknown>'\"'\"', name=<unknown>, GPU has fallen off the bus.' \
        ' SUBSYSTEM=pci' ' DEVICE=+pci:0000:18:00.0' \
        '4;NVRM: Xid (PCI:0000:2a:00): 48, pid=4242, name=python, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 2, subpartition 0.' \
        > $D/kmsgfs/ctl; echo injected")
    run wait_job_done "$id"
    [ "$output" = COMPLETED ]
    e=$(wait_log_end "$D/log/epilog/$id.log")
    grep -q " kmsg 4,[0-9]*,[0-9]*,-,time=[0-9T:.Z-]*;NVRM: Xid (PCI:0000:18:00): 79, " "$e"
    grep -q " kmsg-dict DEVICE=+pci:0000:18:00.0$" "$e"
    grep -q " kmsg 4,[0-9]*,[0-9]*,-,time=[0-9T:.Z-]*;NVRM: Xid (PCI:0000:2a:00): 48, " "$e"
    ! grep -q "before the job" "$e"
    line79=$(grep ' event severity=fatal kind=xid xid=79 ' "$e")
    [[ "$line79" == *"pci_bdf=0000:18:00"* ]]
    [[ "$line79" == *"GPU_HAS_FALLEN_OFF_THE_BUS"* ]]
    [[ "$line79" == *"RESTART_BM"* ]]
    line48=$(grep ' event severity=fatal kind=xid xid=48 ' "$e")
    [[ "$line48" == *"Double-bit ECC"* ]]
    [[ "$line48" == *"reset the GPU"* ]]
    grep -q " event\[summary\] .* fatal=2 " "$e"
    # the kernel context before the job is in the prolog log
    grep -q " kmsg-context .*before the job: not part of its delta" "$(wait_log_end "$D/log/prolog/$id.log")"
    # the node is not drained: fail_on_xid is off by default
    [[ "$(node_state)" != *DRAIN* ]]
}

@test "a ring that wrapped during the job is reported as lost records" {
    id=$(submit --wrap "echo '4;during job 1' > $D/kmsgfs/ctl; echo '!drop 100000' > $D/kmsgfs/ctl; echo '4;during job 2' > $D/kmsgfs/ctl")
    run wait_job_done "$id"
    e=$(wait_log_end "$D/log/epilog/$id.log")
    grep -q " kmsg-lost lost=[1-9][0-9]* reason=\"kernel ring wrapped before the epilog read it\"" "$e"
    grep -q ";during job 2$" "$e"
}

@test "without the prolog's kmsg mark, the epilog takes the kernel records since the job's start" {
    echo "6;long before this job" > "$D/kmsgfs/ctl"
    sleep 0.2
    id=$(submit --wrap "rm -f $D/state/kmsg-marks/\$SLURM_JOB_ID; echo '4;NVRM: Xid (PCI:0000:18:00): 13, pid=77, name=python, Graphics SM Warp Exception' > $D/kmsgfs/ctl")
    [ "$(wait_job_done "$id")" = COMPLETED ]
    e=$(wait_log_end "$D/log/epilog/$id.log")
    grep -q " jobtrail warning: no kmsg mark for this job; using job start time " "$e"
    grep -q " event\[summary\] basis=\"job start time " "$e"
    grep -q " event severity=error kind=xid xid=13 " "$e"
    ! grep -q "long before this job" "$e"
}

@test "a failing wrapped prolog script drains the node, as the site intended" {
    printf '#!/bin/sh\necho "health check: GPU 1 missing"\nexit 1\n' > "$D/etc/prolog.d/50-health.sh"
    chmod +x "$D/etc/prolog.d/50-health.sh"
    id=$(submit --wrap 'true')
    for _ in $(seq 100); do [[ "$(node_state)" == *DRAIN* ]] && break; sleep 0.2; done
    [[ "$(node_state)" == *DRAIN* ]]
    p=$(wait_log_end "$D/log/prolog/$id.log")
    grep -q " stdout\[50-health.sh\] health check: GPU 1 missing$" "$p"
    grep -q " status\[50-health.sh\] status=1 " "$p"
    grep -q " end status=1 .*failed=$D/etc/prolog.d/50-health.sh" "$p"
    # slurmd's order: 50-health ran first and stopped the run, 10-site never started
    ! grep -q "run\[10-site.sh\]" "$p"
    scancel "$id"
    rm -f "$D/etc/prolog.d/50-health.sh"
    resume_node
}

@test "a jobtrail-internal failure (unwritable log directory, bad config key) does not drain the node" {
    JT_LOG_DIR=/proc/jobtrail-cannot-write JT_EXTRA_YAML="unknown_top_key: 1" jt_write_config
    printf '#!/bin/sh\ntouch %s/jobs/site-prolog-ran-$SLURM_JOB_ID\n' "$D" > "$D/etc/prolog.d/20-touch.sh"
    chmod +x "$D/etc/prolog.d/20-touch.sh"
    id=$(submit --wrap 'echo fine')
    run wait_job_done "$id"
    [ "$output" = COMPLETED ]
    sleep 1
    [[ "$(node_state)" != *DRAIN* ]]
    # the site's scripts still ran
    [ -e "$D/jobs/site-prolog-ran-$id" ]
}

@test "a hung wrapped script is killed at its timeout and counts as failed" {
    JT_SCRIPT_TIMEOUT=2s jt_write_config
    printf '#!/bin/sh\necho "about to hang"\nsleep 300\n' > "$D/etc/prolog.d/60-hang.sh"
    chmod +x "$D/etc/prolog.d/60-hang.sh"
    start=$(date +%s)
    id=$(submit --wrap 'true')
    p=$(wait_log_end "$D/log/prolog/$id.log" 30)
    [ $(( $(date +%s) - start )) -lt 20 ]
    grep -q " stdout\[60-hang.sh\] about to hang$" "$p"
    grep -q " status\[60-hang.sh\] status=124 .*timed out, process group killed" "$p"
    ! pgrep -f "sleep 300" >/dev/null
    for _ in $(seq 50); do [[ "$(node_state)" == *DRAIN* ]] && break; sleep 0.2; done
    [[ "$(node_state)" == *DRAIN* ]]
    scancel "$id"
}

@test "a hanging GPU probe is killed at its timeout and the job runs anyway" {
    JT_PROBE_TIMEOUT=1s jt_write_config
    echo hang > "$D/bin/nvidia-smi.mode"
    id=$(submit --wrap 'echo ok')
    run wait_job_done "$id"
    [ "$output" = COMPLETED ]
    p=$(wait_log_end "$D/log/prolog/$id.log")
    grep -q " status\[nvidia-smi\] status=124 .*timed out" "$p"
    grep -q " end status=0 " "$p"
    [[ "$(node_state)" != *DRAIN* ]]
}

@test "optional fail_on_xid policy drains the node after a critical Xid, with the reason in the log" {
    JT_FAIL_ON_XID="79, 48, 74, 95" jt_write_config
    id=$(submit --wrap "echo '4;NVRM: Xid (PCI:0000:18:00): 74, pid=1, NVLink: fatal error detected on link 3' > $D/kmsgfs/ctl")
    e=$(wait_log_end "$D/log/epilog/$id.log")
    grep -q " end status=1 .*drain_reason=\"Xid 74 on 0000:18:00 during the job" "$e"
    grep -q " jobtrail error: failing the epilog so Slurm drains the node: Xid 74 on 0000:18:00" "$e"
    for _ in $(seq 50); do [[ "$(node_state)" == *DRAIN* ]] && break; sleep 0.2; done
    [[ "$(node_state)" == *DRAIN* ]]
}
