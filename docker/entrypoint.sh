#!/bin/sh
# One image, two roles: "controller" runs slurmctld; "node" runs slurmd and jobtrail-shipper.
# The munge key comes from a shared volume, made by the controller on first start.
set -eu
role=${1:?controller or node}
if [ ! -s /etc/munge-shared/munge.key ]; then
    if [ "$role" = controller ]; then
        dd if=/dev/urandom of=/etc/munge-shared/munge.key bs=1024 count=1 2>/dev/null
    else
        while [ ! -s /etc/munge-shared/munge.key ]; do sleep 1; done
    fi
fi
install -o munge -g munge -m 0400 /etc/munge-shared/munge.key /etc/munge/munge.key
install -d -o munge -g munge /run/munge
su -s /bin/sh munge -c /usr/sbin/munged
mkdir -p /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
chown slurm:slurm /var/spool/slurmctld
case "$role" in
controller)
    exec slurmctld -D
    ;;
node)
    # The shipper's gateway password: root-only, never on a command line or in the config.
    (umask 077 && printf '%s' "${LOKI_PASSWORD:-jobtrail-demo}" > /etc/jobtrail/loki.password)
    /usr/sbin/jobtrail-shipper --check-config
    /usr/sbin/jobtrail-shipper &
    exec slurmd -D -N "$(hostname -s)"
    ;;
esac
