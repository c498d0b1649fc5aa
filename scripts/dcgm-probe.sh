#!/usr/bin/env bash
# On a GPU machine (issue 30): is DCGM installed, and what does the real libdcgm answer to the
# dcgm client's connect + register + health check (tests/tools/dcgm_probe.cpp)? Prints the
# versions and answers to compare with the stand-in (tests/fixtures/dcgm). Bounded: each step has
# a timeout, the whole well under 5 minutes. Starts nv-hostengine only if none runs, and stops
# only the one it started.
#   JOBTRAIL_BUILD=<build dir> bash scripts/dcgm-probe.sh
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${JOBTRAIL_BUILD:-build}
say() { printf '== %s\n' "$*"; }

say "machine"
uname -r
timeout 20 nvidia-smi --query-gpu=index,pci.bus_id,name,driver_version --format=csv,noheader 2>&1 || echo "nvidia-smi: not usable"

say "DCGM installed?"
for b in nv-hostengine dcgmi; do printf '%s: %s\n' "$b" "$(command -v "$b" || echo absent)"; done
ldconfig -p | grep -E 'libdcgm\.so' || echo "libdcgm: not in the loader cache"
dpkg-query -W -f '${Package} ${Version}\n' 'datacenter-gpu-manager*' 2>/dev/null || rpm -qa 'datacenter-gpu-manager*' 2>/dev/null || true
command -v nv-hostengine >/dev/null && timeout 10 nv-hostengine --version 2>&1 | head -5
command -v dcgmi >/dev/null && timeout 10 dcgmi --version 2>&1 | head -5
if ! ldconfig -p | grep -qE 'libdcgm\.so\.[34]'; then
  say "no libdcgm.so.3 or .so.4: nothing more to probe"
  exit 0
fi

started=""
if ! pgrep -x nv-hostengine >/dev/null; then
  say "starting nv-hostengine"
  timeout 30 nv-hostengine 2>&1 && started=yes
  sleep 2
fi
trap '[ -n "$started" ] && timeout 30 nv-hostengine --term' EXIT
command -v dcgmi >/dev/null && timeout 30 dcgmi discovery -l 2>&1 | head -20

if [ ! -x "$BUILD/tests/jobtrail-dcgm-probe" ]; then
  say "building jobtrail-dcgm-probe in $BUILD"
  timeout 180 cmake --build "$BUILD" -j"$(nproc)" --target jobtrail-dcgm-probe >/dev/null || exit 1
fi
rc=0
for lib in libdcgm.so.4 libdcgm.so.3; do
  ldconfig -p | grep -q "$lib " || continue
  say "jobtrail-dcgm-probe with $lib"
  timeout 60 "$BUILD/tests/jobtrail-dcgm-probe" --library "$lib" --timeout-ms 10000 --listen-s 5 || rc=1
done
command -v dcgmi >/dev/null && { say "dcgmi health -c (DCGM's own view)"; timeout 30 dcgmi health -c 2>&1 | head -30; }
exit $rc
