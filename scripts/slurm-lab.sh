#!/usr/bin/env bash
# A real single-node Slurm (Debian's slurm-wlm + munge) on localhost, all state under one
# directory. Used by the integration tests and the demo; see ../shared/reference/slurm-lab.md.
#
#   slurm-lab.sh start|stop|restart|status [DIR]        (DIR defaults to /tmp/slurm-lab)
#
# Clients then `source DIR/env.sh`. Knobs (environment):
#   SLURM_LAB_PROLOG, SLURM_LAB_EPILOG   Prolog=/Epilog= programs (default: none)
#   SLURM_LAB_PLUGSTACK                  plugstack.conf lines
#   SLURM_LAB_PROLOG_FLAGS               PrologFlags (default Alloc)
#   SLURM_LAB_PROLOG_EPILOG_TIMEOUT      PrologEpilogTimeout seconds (default 120)
#   SLURM_LAB_REWRITE=1                  rewrite the configs even if they exist
#   SLURM_LAB_WAIT                       seconds to wait for the node to be idle (default 60)
#   SLURM_LAB_GRES, SLURM_LAB_GRES_CONF  the node's Gres= (e.g. gpu:3) and gres.conf's lines
#   SLURM_LAB_OVERSUBSCRIBE              the partition's OverSubscribe= (default NO; YES lets
#                                        jobs asking --oversubscribe share the node's 2 cores)
#   SLURM_LAB_PREFIX                     a Slurm installed under a prefix (e.g. scripts/build-slurm.sh's
#                                        25.11) instead of Debian's: its bin/ and sbin/ come first
#   SLURM_LAB_CTLD_PORT, SLURM_LAB_SLURMD_PORT  ports (default 6817, 6818)
set -euo pipefail

cmd=${1:-status}
D=${2:-${SLURM_LAB_DIR:-/tmp/slurm-lab}}
WAIT=${SLURM_LAB_WAIT:-60}
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
PREFIX=${SLURM_LAB_PREFIX:-}
if [ -n "$PREFIX" ]; then
    [ -x "$PREFIX/sbin/slurmd" ] || { echo "slurm-lab: no Slurm under SLURM_LAB_PREFIX=$PREFIX" >&2; exit 1; }
    export PATH=$PREFIX/sbin:$PREFIX/bin:$PATH
fi

log() { echo "slurm-lab: $*" >&2; }

install_packages() {
    local missing=()
    local want=(munge)
    [ -n "$PREFIX" ] || want+=(slurmctld slurmd slurm-client libslurm-dev)
    for p in "${want[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing ${missing[*]}"
    local made_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        # Keep the packages' postinst from starting default daemons.
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        made_policy=1
    fi
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" >/dev/null
    [ $made_policy -eq 1 ] && rm -f /usr/sbin/policy-rc.d
    return 0
}

# pid from a pid file, only if that process is alive (zombies count as dead) and is `name`.
live_pid() {
    local file=$1 name=$2 pid
    [ -s "$file" ] || return 1
    pid=$(cat "$file")
    [ -r "/proc/$pid/status" ] || return 1
    grep -q "^State:.*Z" "/proc/$pid/status" && return 1
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] || return 1
    echo "$pid"
}

write_configs() {
    local host topo
    host=$(hostname -s)
    mkdir -p "$D"/{etc,run,log/prolog,log/epilog,spool/ctld,spool/d,munge,etc/plugstack.conf.d}
    chmod 711 "$D/munge"
    [ -s "$D/munge/munge.key" ] || mungekey --create --keyfile="$D/munge/munge.key"
    topo=$(slurmd -C 2>/dev/null | head -1 | sed -e 's/ UpTime=.*//' -e "s/^NodeName=[^ ]*/NodeName=$host NodeAddr=127.0.0.1/")
    cat > "$D/etc/slurm.conf" <<CONF
ClusterName=lab
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=${SLURM_LAB_CTLD_PORT:-6817}
SlurmdPort=${SLURM_LAB_SLURMD_PORT:-6818}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge/munge.socket
StateSaveLocation=$D/spool/ctld
SlurmdSpoolDir=$D/spool/d
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
PrologFlags=${SLURM_LAB_PROLOG_FLAGS:-Alloc}
PrologEpilogTimeout=${SLURM_LAB_PROLOG_EPILOG_TIMEOUT:-120}
PlugStackConfig=$D/etc/plugstack.conf
$topo${SLURM_LAB_GRES:+ Gres=$SLURM_LAB_GRES} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=${SLURM_LAB_OVERSUBSCRIBE:-NO}
CONF
    rm -f "$D/etc/gres.conf"
    if [ -n "${SLURM_LAB_GRES:-}" ]; then
        echo "GresTypes=${SLURM_LAB_GRES%%:*}" >> "$D/etc/slurm.conf"
        printf '%s\n' "${SLURM_LAB_GRES_CONF:-}" > "$D/etc/gres.conf"
    fi
    [ -n "${SLURM_LAB_PROLOG:-}" ] && echo "Prolog=$SLURM_LAB_PROLOG" >> "$D/etc/slurm.conf"
    [ -n "${SLURM_LAB_EPILOG:-}" ] && echo "Epilog=$SLURM_LAB_EPILOG" >> "$D/etc/slurm.conf"
    { printf '%s\n' "${SLURM_LAB_PLUGSTACK:-}"; echo "include $D/etc/plugstack.conf.d/*.conf"; } > "$D/etc/plugstack.conf"
    cat > "$D/env.sh" <<ENV
export SLURM_CONF=$D/etc/slurm.conf
export MUNGE_SOCKET=$D/munge/munge.socket
${PREFIX:+export PATH=$PREFIX/sbin:$PREFIX/bin:\$PATH}
ENV
}

node_state() { { scontrol -o show node "$(hostname -s)" 2>/dev/null || true; } | sed -n "s/.*State=\([^ ]*\).*/\1/p"; }

start() {
    install_packages
    if [ ! -s "$D/etc/slurm.conf" ] || [ "${SLURM_LAB_REWRITE:-0}" = 1 ]; then write_configs; fi
    # shellcheck disable=SC1091
    source "$D/env.sh"
    if ! live_pid "$D/run/munged.pid" munged >/dev/null; then
        munged --socket="$D/munge/munge.socket" --key-file="$D/munge/munge.key" --pid-file="$D/run/munged.pid" \
               --log-file="$D/log/munged.log" --seed-file="$D/munge/munged.seed"
    fi
    if ! live_pid "$D/run/slurmctld.pid" slurmctld >/dev/null; then
        # Another cluster (another DIR) on the same ports would make our daemons die at bind().
        for port in "${SLURM_LAB_CTLD_PORT:-6817}" "${SLURM_LAB_SLURMD_PORT:-6818}"; do
            if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
                log "port $port is already in use (another slurm-lab running? stop it: $0 stop OTHER_DIR)"
                exit 1
            fi
        done
        slurmctld -f "$SLURM_CONF"
    fi
    local started_slurmd=0
    if ! live_pid "$D/run/slurmd.pid" slurmd >/dev/null; then
        slurmd -f "$SLURM_CONF" || { log "slurmd failed"; tail -n 20 "$D/log/slurmd.log" >&2; exit 1; }
        started_slurmd=1
    fi
    local t=0 resumed=0 st
    while [ $t -lt $((WAIT * 5)) ]; do
        st=$(node_state)
        case "$st" in
            IDLE|MIXED|ALLOCATED) log "up: node $(hostname -s) $st"; return 0 ;;
            *DRAIN*|*DOWN*)
                if [ $resumed -eq 0 ]; then
                    scontrol update nodename="$(hostname -s)" state=resume >/dev/null 2>&1 || true
                    resumed=1
                fi ;;
        esac
        sleep 0.2
        t=$((t + 1))
    done
    log "node did not become idle within ${WAIT}s (state: ${st:-unknown}, slurmd started: $started_slurmd)"
    tail -n 20 "$D/log/slurmd.log" "$D/log/slurmctld.log" >&2 || true
    exit 1
}

stop() {
    if [ -s "$D/env.sh" ]; then
        # shellcheck disable=SC1091
        source "$D/env.sh"
        scancel --user=root >/dev/null 2>&1 || true
    fi
    local pid
    for spec in slurmd:slurmd slurmctld:slurmctld munged:munged; do
        local name=${spec%%:*}
        if pid=$(live_pid "$D/run/$name.pid" "$name"); then
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 50); do live_pid "$D/run/$name.pid" "$name" >/dev/null || break; sleep 0.1; done
            if pid=$(live_pid "$D/run/$name.pid" "$name"); then kill -9 "$pid" 2>/dev/null || true; fi
        fi
    done
    log "stopped"
}

case "$cmd" in
    start) start ;;
    stop) stop ;;
    restart) stop; start ;;
    status)
        for n in munged slurmctld slurmd; do
            if pid=$(live_pid "$D/run/$n.pid" "$n"); then echo "$n running ($pid)"; else echo "$n stopped"; fi
        done ;;
    *) echo "usage: $0 start|stop|restart|status [DIR]" >&2; exit 2 ;;
esac
