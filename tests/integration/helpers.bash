# Shared by the integration tests (bats) and lab.sh.
D=${SLURM_LAB_DIR:?}
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# A Slurm under a prefix (the test command's 25.11) instead of Debian's: scripts/slurm-lab.sh.
if [ -n "${SLURM_LAB_PREFIX:-}" ]; then export PATH=$SLURM_LAB_PREFIX/sbin:$SLURM_LAB_PREFIX/bin:$PATH; fi
[ -s "$D/env.sh" ] && source "$D/env.sh"
NODE=$(hostname -s)
# Where the lab's plugin puts the jobs' NCCL files (its nccl_dir), and the shipper reads them.
JT_NCCL_DIR=$D/nccl

# shellcheck source=binaries.bash
source "$(dirname "${BASH_SOURCE[0]}")/binaries.bash"

# The collectors' config for the tests; arguments override pieces (see the variables).
jt_write_config() {
    local log_dir=${JT_LOG_DIR:-$D/log}
    cat > "$D/etc/jobtrail.yaml" <<YAML
cluster: lab
collector:
  log_dir: $log_dir
  state_dir: $D/state
  run_dir: $D/run-jobtrail
  kmsg: $D/kmsgfs/kmsg
  nvidia_proc: $D/nvidia
  gres_command: [$(command -v slurmd), -G, -f, $D/etc/slurm.conf]
  path: $D/bin:/usr/local/bin:/usr/bin:/bin
  kill_grace: 500ms
  kernel_context: {records: 20, max_age: 10m}
  prolog:
    scripts: ["$D/etc/prolog.d/*"]
    script_timeout: ${JT_SCRIPT_TIMEOUT:-20s}
    probes:
      - {name: nvidia-smi, command: [nvidia-smi, "--query-gpu=index,pci.bus_id,serial,temperature.gpu", --format=csv], timeout: ${JT_PROBE_TIMEOUT:-5s}}
      - {name: dcgmi-stats, command: [dcgmi, stats, --jstart, "{job_id}"], timeout: 5s}
  epilog:
    scripts: ["$D/etc/epilog.d/*"]
    script_timeout: ${JT_SCRIPT_TIMEOUT:-20s}
    fail_on_xid: [${JT_FAIL_ON_XID:-}]
    probes:
      - {name: nvidia-smi, command: [nvidia-smi, "--query-gpu=index,pci.bus_id,serial,temperature.gpu", --format=csv], timeout: ${JT_PROBE_TIMEOUT:-5s}}
      - {name: dcgmi-stats-job, command: [dcgmi, stats, --job, "{job_id}", -v], timeout: 5s}
shipper:
  loki: {url: "${LOKI_URL:-$(cat "$D/loki.url" 2>/dev/null || echo http://127.0.0.1:9)}", timeout: 5s}
  batch: {max_wait: 200ms}
  retry: {min_backoff: 100ms, max_backoff: 2s}
  metrics: ""
  sources:
    files:
      - {name: prolog-epilog, paths: ["$D/log/{prolog,epilog}/*.log"], job: slurm-prolog-epilog, format: joblog}
      - {name: nccl, paths: ["$JT_NCCL_DIR/*/*.log"], job: nccl, format: nccl}
    journald: {enabled: false}  # no journald on the test machines
${JT_EXTRA_YAML:-}
YAML
}

# Queries the Loki the lab ships to; prints the JSON.
loki_query() {
    curl -s -G "$(cat "$D/loki.url")/loki/api/v1/query_range" --data-urlencode "query=$1" \
        --data-urlencode "start=0" --data-urlencode "limit=5000" --data-urlencode "direction=forward"
}

# The SPANK plugin's plugstack line (srun/sbatch/slurmstepd re-read it at every launch).
jt_write_plugstack() {
    mkdir -p "$D/etc/plugstack.conf.d"
    echo "optional $JT_PLUGIN nccl_dir=$JT_NCCL_DIR run_dir=$D/run-jobtrail ${JT_PLUGSTACK_EXTRA:-}" \
        > "$D/etc/plugstack.conf.d/jobtrail.conf"
}

# The lab's Slurm (scripts/slurm-lab.sh start|restart) with the collectors as Prolog/Epilog and
# the node's GRES: $2 its Gres= (gpu:3, gpu:h100:2,gpu:a100:1), $3 gres.conf's lines.
# The daemons get none of the caller's descriptors (bats waits for its pipes, fd 3 and the
# others it opens, to close: a daemon that inherited one hung the test until its timeout); what
# slurm-lab.sh says goes to its log, shown when it fails.
lab_slurm() {
    local rc=0
    mkdir -p "$D/log"
    SLURM_LAB_PROLOG="$D/etc/jobtrail-prolog.sh" SLURM_LAB_EPILOG="$D/etc/jobtrail-epilog.sh" \
        SLURM_LAB_GRES=$2 SLURM_LAB_GRES_CONF=$3 SLURM_LAB_OVERSUBSCRIBE=YES SLURM_LAB_REWRITE=1 \
        /usr/bin/python3 -c 'import os, sys; os.closerange(3, 1 << 16); os.execv(sys.argv[1], sys.argv[1:])' \
        "$JOBTRAIL_SOURCE/scripts/slurm-lab.sh" "$1" "$D" </dev/null >"$D/log/slurm-lab.log" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || cat "$D/log/slurm-lab.log" >&2
    return "$rc"
}

# The site's own scripts that jobtrail wraps.
jt_write_default_setup() {
    rm -f "$D/etc/prolog.d/"* "$D/etc/epilog.d/"* "$D/bin/nvidia-smi.mode"
    printf '#!/bin/sh\necho "site prolog says hello to job $SLURM_JOB_ID"\necho "site prolog warning" >&2\n' > "$D/etc/prolog.d/10-site.sh"
    printf '#!/bin/sh\necho "site epilog cleaning up job $SLURM_JOB_ID"\n' > "$D/etc/epilog.d/10-site.sh"
    chmod +x "$D/etc/prolog.d/"* "$D/etc/epilog.d/"*
    jt_write_config
}

node_state() { scontrol -o show node "$NODE" | sed -n 's/.*State=\([^ ]*\).*/\1/p'; }
node_reason() { scontrol -o show node "$NODE" | sed -n 's/.* Reason=\(.*\) \[.*/\1/p'; }

resume_node() {
    scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true
    for _ in $(seq 50); do
        case "$(node_state)" in IDLE*|MIXED*|ALLOCATED*) return 0 ;; esac
        sleep 0.2
    done
    return 1
}

job_state() { scontrol -o show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([^ ]*\).*/\1/p'; }

# Waits until a collector's log for a job is complete (has its `end` line); prints the path.
wait_log_end() {
    local f=$1 timeout=${2:-60}
    for _ in $(seq $((timeout * 10))); do
        [ -f "$f" ] && grep -q ' end status=' "$f" && { echo "$f"; return 0; }
        sleep 0.1
    done
    echo "no complete log at $f" >&2
    return 1
}

# Submits a batch job (as root, in $D/jobs) and prints its id.
submit() {
    mkdir -p "$D/jobs"
    # The test harness's own variables stay out of the job (it inherits the environment).
    env -u JOBTRAIL_BUILD -u JOBTRAIL_SOURCE sbatch --parsable -D "$D/jobs" -o "$D/jobs/slurm-%j.out" "$@"
}

# The same as the unprivileged user $1 (Slurm 23.02 removed sbatch/srun --uid: a user submits
# their own jobs, as on a real cluster).
submit_as() {
    local user=$1
    shift
    mkdir -p "$D/jobs"
    runuser -u "$user" -- env -u JOBTRAIL_BUILD -u JOBTRAIL_SOURCE sbatch --parsable -D "$D/jobs" \
        -o "$D/jobs/slurm-%j.out" "$@"
}

# Jobs that wait for a go file ($D/jobs/go.<id>) are let go and cancelled: a failed test must
# not leave them holding the node's GPUs.
release_jobs() {
    local id
    for id in "$@"; do
        touch "$D/jobs/go.$id"
        scancel "$id" 2>/dev/null || true
    done
}

wait_job_done() {
    local id=$1 st
    for _ in $(seq 600); do
        st=$(job_state "$id")
        case "$st" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) echo "$st"; return 0 ;; esac
        sleep 0.1
    done
    echo "job $id still $st" >&2
    return 1
}
