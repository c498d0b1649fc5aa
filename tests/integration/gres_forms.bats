#!/usr/bin/env bats
# However gres.conf names the node's GPUs, the prolog maps the job's GPUs (SLURM_JOB_GPUS: Slurm's
# positions in the node's GRES list) to their device files, and the job's Xid is the job's. Slurm
# numbers the files 0, 1, ... in the order slurmd lists its GRES records, each file of a record a
# position (src/interfaces/gres.c, _foreach_fill_in_gres_devices); `slurmd -G`'s own "Index=" is
# the number the file name ends in, which only the range form happens to make agree.

load helpers

# The lab's three fixture GPUs are minors 4-6 (lab.sh); each test restarts its Slurm with one
# form, and the file leaves it with lab.sh's range again.

teardown_file() {
    lab_slurm restart gpu:3 "Name=gpu File=$D/dev/nvidia[4-6]" >/dev/null 2>&1 || true
    resume_node || true
}

setup() {
    jt_write_default_setup
    jt_write_plugstack
    ids=()
}

teardown() {
    release_jobs "${ids[@]}"
}

# $1 Gres=, $2 gres.conf lines, $3 the device minors of Slurm's GPU positions 0 1 2, in order.
check_form() {
    lab_slurm restart "$1" "$2"
    resume_node
    local expected=($3) id n
    for n in 1 2 3; do
        ids+=("$(submit --gres=gpu:1 --oversubscribe -n1 --wrap "
            while [ ! -e $D/jobs/go.\$SLURM_JOB_ID ]; do sleep 0.05; done")")
    done
    for id in "${ids[@]}"; do
        for _ in $(seq 300); do [ "$(job_state "$id")" = RUNNING ] && break; sleep 0.1; done
        [ "$(job_state "$id")" = RUNNING ]
        wait_log_end "$D/log/prolog/$id.log" >/dev/null
    done
    local minors=()
    for id in "${ids[@]}"; do
        local prolog=$D/log/prolog/$id.log
        ! grep -q "device\[unresolved\]" "$prolog"
        pos=$(grep -o ' gpus=[0-9]*' "$prolog" | head -1 | cut -d= -f2)
        minor=$(sed -n 's/.*"index":\([0-9]*\).*/\1/p' "$D/run-jobtrail/jobs/$id")
        echo "job $id: Slurm GPU $pos -> minor $minor (expected ${expected[$pos]})"
        [ "$minor" = "${expected[$pos]}" ]
        minors+=("$minor")
    done
    [ "$(printf '%s\n' "${minors[@]}" | sort -u | wc -l)" -eq 3 ]
    # An Xid on the second job's GPU is that job's, in its own epilog.
    j2=${ids[1]}
    bdf=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["devices"][0]["bdf"])' \
        "$D/run-jobtrail/jobs/$j2")
    echo "4;NVRM: Xid (PCI:${bdf%.*}): 79, pid=1, GPU has fallen off the bus." > "$D/kmsgfs/ctl"
    touch "$D/jobs/go.${ids[0]}" "$D/jobs/go.${ids[1]}" "$D/jobs/go.${ids[2]}"
    for id in "${ids[@]}"; do wait_job_done "$id" >/dev/null; done
    e2=$(wait_log_end "$D/log/epilog/$j2.log")
    grep -q "xid=79 pci_bdf=${bdf%.*} .* owner=this_job owner_job=$j2 " "$e2"
    grep -q "xid=79 pci_bdf=${bdf%.*} .* owner=other_job owner_job=$j2 " "$(wait_log_end "$D/log/epilog/${ids[0]}.log")"
}

@test "gres.conf with one line per device, not in the files' order: each job's GPU and its Xid" {
    check_form gpu:3 "Name=gpu File=$D/dev/nvidia6
Name=gpu File=$D/dev/nvidia4
Name=gpu File=$D/dev/nvidia5" "6 4 5"
}

@test "gres.conf with typed lines (gpu:h100:2,gpu:a100:1): each job's GPU and its Xid" {
    check_form gpu:h100:2,gpu:a100:1 "Name=gpu Type=h100 File=$D/dev/nvidia[5-6]
Name=gpu Type=a100 File=$D/dev/nvidia4" "5 6 4"
}

@test "gres.conf as one range: each job's GPU and its Xid" {
    check_form gpu:3 "Name=gpu File=$D/dev/nvidia[4-6]" "4 5 6"
}
