#!/usr/bin/env bash
# A real multi-node Slurm on one machine: one slurmctld (in this network namespace, on the bridge
# address .1) and N slurmd, each in its own network, UTS and mount namespaces with its own host
# name (jt01...), its own address on a bridge this script creates (veth pairs), and its own
# /var/log/slurm, /run, /var/lib/jobtrail and /dev/kmsg (bind mounts of DIR/nodes/<node>/...).
# Munge is shared (one key). Optionally each node gets a kmsg fixture (kmsgfs, mounted at
# DIR/nodes/<node>/kmsgfs and bound over the node's /dev/kmsg), its own jobtrail-shipper and all
# of them ship to one Loki test double listening on the bridge. What it starts in the background
# closes fd 3 (bats waits for whoever holds it). See ../shared/reference/slurm-lab.md
# for the single-node lab this is modelled on; the two run side by side (other ports, dirs, net).
#
#   slurm-cluster.sh start|stop|status [DIR]      (DIR defaults to /tmp/slurm-cluster)
#   slurm-cluster.sh exec DIR NODE CMD...         run CMD in NODE's namespaces
#   slurm-cluster.sh shipper start|stop|kill DIR NODE
#
# Clients then `source DIR/env.sh` (SLURM_CONF, MUNGE_SOCKET, CLUSTER_NODES, CLUSTER_LOKI_URL).
# Knobs (environment):
#   SLURM_CLUSTER_NODES        number of nodes (default 4), named PREFIX01...
#   SLURM_CLUSTER_PREFIX       node name prefix (default jt)
#   SLURM_CLUSTER_NET          first three octets of the /24 (default 10.231.15); .1 is slurmctld
#   SLURM_CLUSTER_BRIDGE       bridge name (default jtcbr0); veths are <bridge>v<i>
#   SLURM_CLUSTER_CTLD_PORT    slurmctld port (default 6917; slurmd uses 6818 inside each netns)
#   SLURM_CLUSTER_PROLOG, SLURM_CLUSTER_EPILOG, SLURM_CLUSTER_PLUGSTACK, SLURM_CLUSTER_PROLOG_FLAGS
#   SLURM_CLUSTER_KMSGFS       kmsgfs binary: gives every node a kmsg fixture
#   SLURM_CLUSTER_SHIPPER      jobtrail-shipper binary and SLURM_CLUSTER_SHIPPER_CONFIG its config:
#                              one shipper per node, in the node's namespaces
#   SLURM_CLUSTER_LOKI_URL     Loki to ship to; without it a Loki test double on <net>.1
#   SLURM_CLUSTER_WAIT         seconds to wait for all nodes to be idle (default 60)
set -euo pipefail

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
HERE=$(cd "$(dirname "$0")" && pwd)
log() { echo "slurm-cluster: $*" >&2; }
usage() {
    echo "usage: $0 start|stop|status [DIR] | exec DIR NODE CMD... | shipper start|stop|kill DIR NODE" >&2
    exit 2
}

cmd=${1:-status}
sub=
case "$cmd" in
    exec) D=${2:?DIR}; NODE_ARG=${3:?NODE}; shift 3 ;;
    shipper) sub=${2:?start|stop|kill}; D=${3:?DIR}; NODE_ARG=${4:?NODE} ;;
    start|stop|status) D=${2:-${SLURM_CLUSTER_DIR:-/tmp/slurm-cluster}} ;;
    *) usage ;;
esac
D=$(mkdir -p "$D" && cd "$D" && pwd)
# What start chose is kept in DIR/cluster.env, so stop/status/exec need no knobs.
if [ "$cmd" != start ] && [ -s "$D/cluster.env" ]; then
    # shellcheck disable=SC1091
    source "$D/cluster.env"
fi
N=${SLURM_CLUSTER_NODES:-4}
PREFIX=${SLURM_CLUSTER_PREFIX:-jt}
NET=${SLURM_CLUSTER_NET:-10.231.15}
BRIDGE=${SLURM_CLUSTER_BRIDGE:-jtcbr0}
CTLD_PORT=${SLURM_CLUSTER_CTLD_PORT:-6917}
WAIT=${SLURM_CLUSTER_WAIT:-60}
[[ "$N" =~ ^[0-9]+$ ]] && [ "$N" -ge 1 ] && [ "$N" -le 200 ] || { log "SLURM_CLUSTER_NODES=$N: want 1..200"; exit 2; }
[ ${#BRIDGE} -le 12 ] || { log "SLURM_CLUSTER_BRIDGE=$BRIDGE: at most 12 characters (veths add 3)"; exit 2; }

node_name() { printf '%s%02d' "$PREFIX" "$1"; }
node_addr() { echo "$NET.$((10 + $1))"; }
node_index() {
    local i
    for i in $(seq "$N"); do [ "$(node_name "$i")" = "$1" ] && { echo "$i"; return 0; }; done
    log "no node $1 in $D (nodes: $(node_name 1)..$(node_name "$N"))"
    return 1
}
nodelist() { printf '%s[%s-%s]' "$PREFIX" "$(printf %02d 1)" "$(printf %02d "$N")"; }

# pid from a pid file, only if that process is alive (zombies count as dead) and is `name`.
live_pid() {
    local file=$1 name=$2 pid
    [ -s "$file" ] || return 1
    pid=$(cat "$file" 2>/dev/null) || return 1
    [ -r "/proc/$pid/status" ] || return 1
    grep -q "^State:.*Z" "/proc/$pid/status" && return 1
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] || return 1
    echo "$pid"
}

stop_pid() {  # file name: SIGTERM, up to 5 s, then SIGKILL
    local pid
    pid=$(live_pid "$1" "$2") || return 0
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do live_pid "$1" "$2" >/dev/null || return 0; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
}

ns_pid() { live_pid "$D/nodes/$1/ns.pid" sleep; }
in_node() {  # node cmd...
    local pid
    pid=$(ns_pid "$1") || { log "node $1 has no namespaces (is $D started?)"; return 1; }
    shift
    nsenter -t "$pid" --net --uts --mount -- "$@"
}

write_configs() {
    local host topo i
    host=$(hostname -s)
    mkdir -p "$D"/{etc/plugstack.conf.d,run,log,spool/ctld,munge,node}
    chmod 711 "$D/munge"
    [ -s "$D/munge/munge.key" ] || mungekey --create --keyfile="$D/munge/munge.key"
    # Every node claims the machine's own topology (each slurmd checks it against its hardware).
    topo=$(slurmd -C 2>/dev/null | head -1 | sed -e 's/ UpTime=.*//' -e 's/^NodeName=[^ ]* //')
    {
        cat <<CONF
ClusterName=cluster
SlurmctldHost=$host($NET.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge/munge.socket
StateSaveLocation=$D/spool/ctld
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmctldLogFile=$D/log/slurmctld.log
# $D/node is each node's own DIR/nodes/<node> inside its mount namespace.
SlurmdSpoolDir=$D/node/spool
SlurmdPidFile=$D/node/slurmd.pid
SlurmdLogFile=$D/node/slurmd.log
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
PrologFlags=${SLURM_CLUSTER_PROLOG_FLAGS:-Alloc}
PrologEpilogTimeout=120
PlugStackConfig=$D/etc/plugstack.conf
CONF
        for i in $(seq "$N"); do
            echo "NodeName=$(node_name "$i") NodeAddr=$(node_addr "$i") $topo State=UNKNOWN"
        done
        echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
        [ -n "${SLURM_CLUSTER_PROLOG:-}" ] && echo "Prolog=$SLURM_CLUSTER_PROLOG"
        [ -n "${SLURM_CLUSTER_EPILOG:-}" ] && echo "Epilog=$SLURM_CLUSTER_EPILOG"
        true
    } > "$D/etc/slurm.conf"
    { printf '%s\n' "${SLURM_CLUSTER_PLUGSTACK:-}"; echo "include $D/etc/plugstack.conf.d/*.conf"; } > "$D/etc/plugstack.conf"
    # The nodes' /etc/hosts: the machine's, and every node and the controller by name.
    {
        grep -v "^$NET\." /etc/hosts || true
        echo "$NET.1 $host-ctld"
        for i in $(seq "$N"); do echo "$(node_addr "$i") $(node_name "$i")"; done
    } > "$D/etc/hosts"
}

start_loki() {
    if [ -n "${SLURM_CLUSTER_LOKI_URL:-}" ]; then
        echo "$SLURM_CLUSTER_LOKI_URL" > "$D/loki.url"
        return 0
    fi
    live_pid "$D/run/loki.pid" python3 >/dev/null && return 0
    rm -f "$D/run/loki.port"
    setsid /usr/bin/python3 "$HERE/../tests/loki_double/loki_double.py" --host "$NET.1" \
        --port-file "$D/run/loki.port" --max-streams 100000 >"$D/log/loki-double.log" 2>&1 </dev/null 3>&- &
    echo $! > "$D/run/loki.pid"
    for _ in $(seq 100); do [ -s "$D/run/loki.port" ] && break; sleep 0.05; done
    [ -s "$D/run/loki.port" ] || { log "the Loki double did not start"; cat "$D/log/loki-double.log" >&2; exit 1; }
    echo "http://$NET.1:$(cat "$D/run/loki.port")" > "$D/loki.url"
}

start_bridge() {
    if ip link show "$BRIDGE" >/dev/null 2>&1; then
        # Ours from an earlier start, or someone else's: never take over another cluster's bridge.
        [ "$(cat "$D/run/bridge" 2>/dev/null)" = "$BRIDGE" ] || {
            log "bridge $BRIDGE exists and is not $D's (another slurm-cluster? set SLURM_CLUSTER_BRIDGE/NET)"
            exit 1
        }
    else
        if ip -br addr | grep -q " $NET\.[0-9]*/"; then
            log "$NET.0/24 is already on an interface: set SLURM_CLUSTER_NET"
            exit 1
        fi
        ip link add "$BRIDGE" type bridge
        ip addr add "$NET.1/24" dev "$BRIDGE"
        ip link set "$BRIDGE" up
        echo "$BRIDGE" > "$D/run/bridge"
    fi
}

# The kmsg fixtures are mounted before any node's mount namespace copies this one.
start_kmsgfs() {
    local n nd
    n=$(node_name "$1")
    nd=$D/nodes/$n
    mkdir -p "$nd"/{spool,log/prolog,log/epilog,run,lib-jobtrail,kmsgfs}
    if [ -n "${SLURM_CLUSTER_KMSGFS:-}" ] && ! mountpoint -q "$nd/kmsgfs"; then
        # A new ring is a new boot for the node: forget its kernel positions, spool and job logs.
        rm -rf "${nd:?}/lib-jobtrail" "$nd/log" && mkdir -p "$nd"/{lib-jobtrail,log/prolog,log/epilog}
        "$SLURM_CLUSTER_KMSGFS" "$nd/kmsgfs" --ring-bytes 1048576 >"$nd/kmsgfs.log" 2>&1 </dev/null 3>&- &
        echo $! > "$nd/kmsgfs.pid"
        for _ in $(seq 100); do [ -e "$nd/kmsgfs/kmsg" ] && break; sleep 0.05; done
        [ -e "$nd/kmsgfs/kmsg" ] || { log "$n: kmsgfs did not mount"; cat "$nd/kmsgfs.log" >&2; exit 1; }
        echo "6;kmsgfs: test ring of $n started" > "$nd/kmsgfs/ctl"
    fi
}

start_node() {
    local i=$1 n nd pid veth
    n=$(node_name "$i")
    nd=$D/nodes/$n
    veth=${BRIDGE}v$i
    if ! pid=$(ns_pid "$n"); then
        local kmsg_bind=
        [ -e "$nd/kmsgfs/kmsg" ] && kmsg_bind="mount --bind $nd/kmsgfs/kmsg /dev/kmsg"
        mkdir -p /var/log/slurm /var/lib/jobtrail
        # unshare execs sh in the new namespaces (no fork), which sets them up and becomes the
        # holder the others nsenter; its pid is the node's.
        setsid unshare --net --uts --mount --propagation private -- /bin/sh -ec "
            hostname $n
            mount --rbind $nd $D/node
            mount --bind $nd/log /var/log/slurm
            mount --bind $nd/run /run
            mount --bind $nd/lib-jobtrail /var/lib/jobtrail
            mount --bind $D/etc/hosts /etc/hosts
            $kmsg_bind
            ip link set lo up
            touch $nd/ns.ready
            exec sleep infinity" </dev/null >"$nd/ns.log" 2>&1 3>&- &
        pid=$!
        echo "$pid" > "$nd/ns.pid"
        rm -f "$nd/ns.ready"
        for _ in $(seq 100); do [ -e "$nd/ns.ready" ] && break; sleep 0.05; done
        [ -e "$nd/ns.ready" ] || { log "$n: namespaces not set up"; cat "$nd/ns.log" >&2; exit 1; }
        ip link del "$veth" >/dev/null 2>&1 || true
        ip link add "$veth" type veth peer name eth0 netns "$pid"
        ip link set "$veth" master "$BRIDGE" up
        nsenter -t "$pid" --net sh -ec "ip addr add $(node_addr "$i")/24 dev eth0; ip link set eth0 up"
    fi
    if ! live_pid "$nd/slurmd.pid" slurmd >/dev/null; then
        in_node "$n" slurmd -f "$SLURM_CONF" || { log "$n: slurmd failed"; tail -n 20 "$nd/slurmd.log" >&2; exit 1; }
    fi
}

shipper_start() {
    local n=$1 nd=$D/nodes/$1
    [ -n "${SLURM_CLUSTER_SHIPPER:-}" ] || { log "no SLURM_CLUSTER_SHIPPER given at start"; return 1; }
    live_pid "$nd/shipper.pid" jobtrail-shippe >/dev/null && return 0
    local ns pid
    ns=$(ns_pid "$n") || { log "node $n has no namespaces (is $D started?)"; return 1; }
    # Its own session (a kill of the test's process group leaves it), in the node's namespaces.
    nsenter -t "$ns" --net --uts --mount -- setsid "$SLURM_CLUSTER_SHIPPER" --config "$SLURM_CLUSTER_SHIPPER_CONFIG" \
        >>"$nd/log/shipper.log" 2>&1 </dev/null 3>&- &
    pid=$!
    # nsenter execs (no fork without --pid), setsid forks only when it is a group leader.
    for _ in $(seq 50); do
        [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = jobtrail-shippe ] && break
        sleep 0.02
    done
    echo "$pid" > "$nd/shipper.pid"
    live_pid "$nd/shipper.pid" jobtrail-shippe >/dev/null || { log "$n: the shipper did not start"; tail -n 5 "$nd/log/shipper.log" >&2; return 1; }
}

node_states() { sinfo -h -N -o '%N %T' 2>/dev/null || true; }

start() {
    for p in slurmctld slurmd slurm-client munge; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            { log "$p is not installed (scripts/slurm-lab.sh start installs it)"; exit 1; }
    done
    [ "$(id -u)" = 0 ] || { log "needs root (namespaces, bridge, mounts)"; exit 1; }
    {
        echo "SLURM_CLUSTER_NODES=$N"; echo "SLURM_CLUSTER_PREFIX=$PREFIX"; echo "SLURM_CLUSTER_NET=$NET"
        echo "SLURM_CLUSTER_BRIDGE=$BRIDGE"; echo "SLURM_CLUSTER_CTLD_PORT=$CTLD_PORT"
        printf 'SLURM_CLUSTER_SHIPPER=%q\nSLURM_CLUSTER_SHIPPER_CONFIG=%q\n' "${SLURM_CLUSTER_SHIPPER:-}" \
            "${SLURM_CLUSTER_SHIPPER_CONFIG:-}"
    } > "$D/cluster.env"
    write_configs
    cat > "$D/env.sh" <<ENV
export SLURM_CONF=$D/etc/slurm.conf
export MUNGE_SOCKET=$D/munge/munge.socket
export CLUSTER_NODES="$(for i in $(seq "$N"); do printf '%s ' "$(node_name "$i")"; done)"
export CLUSTER_NODELIST="$(nodelist)"
ENV
    # shellcheck disable=SC1091
    source "$D/env.sh"
    if ! live_pid "$D/run/munged.pid" munged >/dev/null; then
        munged --socket="$D/munge/munge.socket" --key-file="$D/munge/munge.key" --pid-file="$D/run/munged.pid" \
               --log-file="$D/log/munged.log" --seed-file="$D/munge/munged.seed"
    fi
    start_bridge
    if ! live_pid "$D/run/slurmctld.pid" slurmctld >/dev/null; then
        if (exec 3<>"/dev/tcp/$NET.1/$CTLD_PORT") 2>/dev/null; then
            log "port $CTLD_PORT is already in use: set SLURM_CLUSTER_CTLD_PORT"
            exit 1
        fi
        slurmctld -f "$SLURM_CONF"
    fi
    start_loki
    echo "export CLUSTER_LOKI_URL=$(cat "$D/loki.url")" >> "$D/env.sh"
    local i
    for i in $(seq "$N"); do start_kmsgfs "$i"; done
    for i in $(seq "$N"); do start_node "$i"; done
    if [ -n "${SLURM_CLUSTER_SHIPPER:-}" ] && [ ! -s "${SLURM_CLUSTER_SHIPPER_CONFIG:-}" ]; then
        # The config names the Loki, whose address is known only now: its writer starts them.
        log "shippers not started: no ${SLURM_CLUSTER_SHIPPER_CONFIG:-SLURM_CLUSTER_SHIPPER_CONFIG} yet (then: $0 shipper start $D NODE)"
    else
        for i in $(seq "$N"); do shipper_start "$(node_name "$i")"; done
    fi
    local t=0 resumed=0 idle states
    while [ $t -lt $((WAIT * 5)) ]; do
        states=$(node_states)
        idle=$(echo "$states" | grep -cE ' (idle|mixed|allocated)$' || true)
        [ "$idle" -eq "$N" ] && { log "up: $N nodes $(nodelist) idle, Loki $(cat "$D/loki.url")"; return 0; }
        if [ $resumed -eq 0 ] && echo "$states" | grep -qE 'drain|down'; then
            scontrol update nodename="$(nodelist)" state=resume >/dev/null 2>&1 || true
            resumed=1
        fi
        sleep 0.2
        t=$((t + 1))
    done
    log "nodes not idle within ${WAIT}s:"; echo "$states" >&2
    tail -n 20 "$D/log/slurmctld.log" "$D"/nodes/*/slurmd.log >&2 || true
    exit 1
}

stop() {
    if [ -s "$D/env.sh" ]; then
        # shellcheck disable=SC1091
        source "$D/env.sh"
        scancel --user=root >/dev/null 2>&1 || true
    fi
    local nd n
    for nd in "$D"/nodes/*/; do
        [ -d "$nd" ] || continue
        n=$(basename "$nd")
        stop_pid "$nd/shipper.pid" jobtrail-shippe
        stop_pid "$nd/slurmd.pid" slurmd
        stop_pid "$nd/ns.pid" sleep  # the last process in them: the namespaces and the veth go
        if mountpoint -q "$nd/kmsgfs"; then umount -l "$nd/kmsgfs" || true; fi
        stop_pid "$nd/kmsgfs.pid" kmsgfs
    done
    stop_pid "$D/run/slurmctld.pid" slurmctld
    stop_pid "$D/run/loki.pid" python3
    stop_pid "$D/run/munged.pid" munged
    if [ "$(cat "$D/run/bridge" 2>/dev/null)" = "$BRIDGE" ]; then
        ip link del "$BRIDGE" 2>/dev/null || true
        rm -f "$D/run/bridge"
    fi
    log "stopped"
}

status() {
    local pid i n
    for p in munged slurmctld; do
        if pid=$(live_pid "$D/run/$p.pid" "$p"); then echo "$p running ($pid)"; else echo "$p stopped"; fi
    done
    for i in $(seq "$N"); do
        n=$(node_name "$i")
        for p in slurmd:slurmd shipper:jobtrail-shippe kmsgfs:kmsgfs; do
            if pid=$(live_pid "$D/nodes/$n/${p%%:*}.pid" "${p#*:}"); then
                echo "$n ${p%%:*} running ($pid)"
            else
                echo "$n ${p%%:*} stopped"
            fi
        done
    done
}

case "$cmd" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    exec) in_node "$NODE_ARG" "$@" ;;
    shipper)
        node_index "$NODE_ARG" >/dev/null
        case "$sub" in
            start) shipper_start "$NODE_ARG" ;;
            stop) stop_pid "$D/nodes/$NODE_ARG/shipper.pid" jobtrail-shippe ;;
            kill)
                pid=$(live_pid "$D/nodes/$NODE_ARG/shipper.pid" jobtrail-shippe) || { log "$NODE_ARG: no shipper"; exit 1; }
                kill -9 "$pid"
                for _ in $(seq 50); do live_pid "$D/nodes/$NODE_ARG/shipper.pid" jobtrail-shippe >/dev/null || break; sleep 0.1; done ;;
            *) usage ;;
        esac ;;
esac
