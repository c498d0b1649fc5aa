#!/usr/bin/env bash
# Brings up (or down) the multi-node test cluster (CTest fixture slurm_cluster): N nodes from
# scripts/slurm-cluster.sh, each with its kmsg fixture, jobtrail's collectors as Prolog/Epilog,
# the SPANK plugin with its default paths (/var/log/slurm/nccl, /run/jobtrail: the node's own, in
# its mount namespace) and its own jobtrail-shipper, all shipping to one Loki double.
set -euo pipefail
: "${SLURM_CLUSTER_DIR:?}" "${JOBTRAIL_BUILD:?}" "${JOBTRAIL_SOURCE:?}"
D=$SLURM_CLUSTER_DIR
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=cluster.bash
source "$here/cluster.bash"

case "${1:-}" in
start)
    mkdir -p "$D/etc/plugstack.conf.d" "$D/etc/prolog.d" "$D/etc/epilog.d" "$D/bin" "$D/jobs"
    cp "$here/../bin/nvidia-smi" "$here/../bin/dcgmi" "$here/../bin/fake-nccl" "$D/bin/"
    chmod +x "$D/bin/"*
    printf '#!/bin/sh\necho "site prolog on $(hostname) for job $SLURM_JOB_ID"\n' > "$D/etc/prolog.d/10-site.sh"
    printf '#!/bin/sh\necho "site epilog on $(hostname) for job $SLURM_JOB_ID"\n' > "$D/etc/epilog.d/10-site.sh"
    chmod +x "$D/etc/prolog.d/"* "$D/etc/epilog.d/"*
    echo "optional $JT_PLUGIN" > "$D/etc/plugstack.conf.d/jobtrail.conf"
    printf '#!/bin/sh\nexec %s --config %s/etc/jobtrail.yaml\n' "$JT_PROLOG" "$D" > "$D/etc/jobtrail-prolog.sh"
    printf '#!/bin/sh\nexec %s --config %s/etc/jobtrail.yaml\n' "$JT_EPILOG" "$D" > "$D/etc/jobtrail-epilog.sh"
    chmod +x "$D/etc/jobtrail-prolog.sh" "$D/etc/jobtrail-epilog.sh"
    rm -f "$D/etc/jobtrail.yaml"  # written below, once the Loki double's address is known
    SLURM_CLUSTER_NODES=${SLURM_CLUSTER_NODES:-4} \
    SLURM_CLUSTER_PROLOG="$D/etc/jobtrail-prolog.sh" SLURM_CLUSTER_EPILOG="$D/etc/jobtrail-epilog.sh" \
    SLURM_CLUSTER_KMSGFS="$JOBTRAIL_BUILD/tests/fixtures/kmsgfs/kmsgfs" \
    SLURM_CLUSTER_SHIPPER="$JT_SHIPPER" SLURM_CLUSTER_SHIPPER_CONFIG="$D/etc/jobtrail.yaml" \
        "$JOBTRAIL_SOURCE/scripts/slurm-cluster.sh" start "$D"
    cluster_write_config
    for n in $CLUSTER_NODES_LIST; do "$JOBTRAIL_SOURCE/scripts/slurm-cluster.sh" shipper start "$D" "$n"; done
    ;;
stop)
    "$JOBTRAIL_SOURCE/scripts/slurm-cluster.sh" stop "$D" || true
    ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
