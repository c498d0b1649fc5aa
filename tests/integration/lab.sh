#!/usr/bin/env bash
# Brings up (or down) the shared test cluster: the kmsg fixture, jobtrail's collectors as
# Prolog/Epilog, and a real single-node Slurm. One cluster per test run (CTest fixture).
set -euo pipefail
: "${SLURM_LAB_DIR:?}" "${JOBTRAIL_BUILD:?}" "${JOBTRAIL_SOURCE:?}"
D=$SLURM_LAB_DIR
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=helpers.bash
source "$here/helpers.bash"

case "${1:-}" in
start)
    mkdir -p "$D/etc/prolog.d" "$D/etc/epilog.d" "$D/kmsgfs" "$D/bin"
    # kmsg fixture
    if ! mountpoint -q "$D/kmsgfs"; then
        # A new ring is a new boot for everything that remembers kernel positions, but the boot
        # id is the machine's: forget the previous lab's positions, spool and job logs (Slurm
        # may hand out the same job ids again).
        rm -rf "$D/state" "$D/log/prolog" "$D/log/epilog" "$JT_NCCL_DIR"
        "$JOBTRAIL_BUILD/tests/fixtures/kmsgfs/kmsgfs" "$D/kmsgfs" --ring-bytes 1048576 >"$D/kmsgfs.log" 2>&1 &
        echo $! > "$D/kmsgfs.pid"
        for _ in $(seq 100); do [ -e "$D/kmsgfs/kmsg" ] && break; sleep 0.05; done
        [ -e "$D/kmsgfs/kmsg" ] || { echo "kmsgfs did not mount" >&2; cat "$D/kmsgfs.log" >&2; exit 1; }
        echo "6;kmsgfs: test ring started" > "$D/kmsgfs/ctl"
    fi
    # Three fake GPUs: device files Slurm hands out through GRES, and the driver's /proc view of
    # them (the format of kernel-open/nvidia/nv-procfs.c). Minors 4-6, so Slurm's indices 0-2
    # (SLURM_JOB_GPUS: positions in the GRES list) are not the minors; the bus of minor 4+N is the
    # one nvidia-smi's stand-in prints for index N.
    mkdir -p "$D/dev"
    rm -rf "$D/nvidia"
    bdfs=(0000:18:00.0 0000:2a:00.0 0000:3a:00.0)
    for i in 0 1 2; do
        m=$((i + 4))
        [ -c "$D/dev/nvidia$m" ] || mknod "$D/dev/nvidia$m" c 195 "$m"
        mkdir -p "$D/nvidia/gpus/${bdfs[$i]}"
        printf 'Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nGPU UUID: \t GPU-5a3d1c52-0a51-2a0c-5b3e-8d0d5e9f2c1%s\nVideo BIOS: \t 96.00.74.00.0d\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t %s\nDevice Minor: \t %s\nGPU Firmware: \t 550.54.15\nGPU Excluded:\t No\n' \
            "$i" "${bdfs[$i]}" "$m" > "$D/nvidia/gpus/${bdfs[$i]}/information"
    done
    # stand-ins for the GPU tools, with real output formats
    cp "$here/bin/nvidia-smi" "$here/bin/dcgmi" "$here/bin/fake-nccl" "$D/bin/"
    chmod +x "$D/bin/"*
    jt_write_default_setup
    # A job user that is not root, for ownership checks.
    id jtuser >/dev/null 2>&1 || useradd --system --no-create-home --shell /bin/sh jtuser
    mkdir -p "$D/jobs" && chmod 1777 "$D/jobs"
    jt_write_plugstack
    # The collectors as slurmd runs them: no arguments, so a two-line wrapper names the config.
    printf '#!/bin/sh\nexec %s --config %s/etc/jobtrail.yaml\n' "$JT_PROLOG" "$D" > "$D/etc/jobtrail-prolog.sh"
    printf '#!/bin/sh\nexec %s --config %s/etc/jobtrail.yaml\n' "$JT_EPILOG" "$D" > "$D/etc/jobtrail-epilog.sh"
    chmod +x "$D/etc/jobtrail-prolog.sh" "$D/etc/jobtrail-epilog.sh"
    lab_slurm start gpu:3 "Name=gpu File=$D/dev/nvidia[4-6]"
    # Loki: the one in LOKI_URL, else the test double; and the node's shipper, as a daemon.
    if [ -n "${LOKI_URL:-}" ]; then
        echo "$LOKI_URL" > "$D/loki.url"
    elif ! { [ -s "$D/loki.pid" ] && kill -0 "$(cat "$D/loki.pid")" 2>/dev/null; }; then
        rm -f "$D/loki.port"
        setsid /usr/bin/python3 "$JOBTRAIL_SOURCE/tests/loki_double/loki_double.py" --port-file "$D/loki.port" \
            >"$D/log/loki-double.log" 2>&1 < /dev/null &
        echo $! > "$D/loki.pid"
        for _ in $(seq 100); do [ -s "$D/loki.port" ] && break; sleep 0.05; done
        echo "http://127.0.0.1:$(cat "$D/loki.port")" > "$D/loki.url"
    fi
    jt_write_config
    if ! { [ -s "$D/shipper.pid" ] && kill -0 "$(cat "$D/shipper.pid")" 2>/dev/null; }; then
        setsid "$JT_SHIPPER" --config "$D/etc/jobtrail.yaml" \
            >"$D/log/shipper.log" 2>&1 < /dev/null &
        echo $! > "$D/shipper.pid"
    fi
    ;;
stop)
    "$JOBTRAIL_SOURCE/scripts/slurm-lab.sh" stop "$D" || true
    for p in shipper loki; do
        if [ -s "$D/$p.pid" ]; then kill "$(cat "$D/$p.pid")" 2>/dev/null || true; rm -f "$D/$p.pid"; fi
    done
    if mountpoint -q "$D/kmsgfs"; then umount -l "$D/kmsgfs" || true; fi
    [ -s "$D/kmsgfs.pid" ] && kill "$(cat "$D/kmsgfs.pid")" 2>/dev/null || true
    ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
