#!/usr/bin/env bash
# Builds a current Slurm from SchedMD's release (../shared/slurm/slurm-<ver>.tar.xz, beside the
# clone) once per machine, under a cache directory outside the clone, and prints its install
# prefix. A build whose stamp (the tarball's SHA-256, this recipe's flags) matches is reused as it
# is: configure takes about 50 s and make + install 8-17 min on 2 cores, too long for every run.
#
#   build-slurm.sh [TARBALL]        prints e.g. /var/cache/jobtrail-ci/slurm-25.11.7-3f2a9c1b0d4e
#
# Only what the labs need: no GUI, no slurmrestd, without NVML, PMIx and UCX (none here).
# JOBTRAIL_SLURM_CACHE sets the cache directory (default /var/cache/jobtrail-ci).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# (|| true: with pipefail, ls finding nothing would end the script here, before it says why)
tarball=${1:-$( (ls -1 "$here"/../../shared/slurm/slurm-*.tar.xz 2>/dev/null || true) | sort -V | tail -n 1)}
cache=${JOBTRAIL_SLURM_CACHE:-/var/cache/jobtrail-ci}
log() { echo "build-slurm: $*" >&2; }

[ -n "$tarball" ] && [ -r "$tarball" ] || { log "no Slurm release tarball (looked in $here/../../shared/slurm)"; exit 1; }
tarball=$(cd "$(dirname "$tarball")" && pwd)/$(basename "$tarball")
if [ -r "$(dirname "$tarball")/SHA256SUMS" ]; then
    (cd "$(dirname "$tarball")" && grep " $(basename "$tarball")\$" SHA256SUMS | sha256sum -c --quiet -) ||
        { log "$tarball does not match its SHA256SUMS"; exit 1; }
fi
version=$(basename "$tarball" .tar.xz)  # slurm-25.11.7

FLAGS=(--disable-static --disable-sview --disable-slurmrestd --disable-x11 --without-nvml --without-pmix
       --without-ucx --without-rsmi --without-oneapi --without-hdf5 --without-freeipmi --without-rdkafka
       --without-bpf)
DEPS=(build-essential libmunge-dev libjson-c-dev libhwloc-dev liblz4-dev libpam0g-dev libdbus-1-dev
      libhttp-parser-dev munge xz-utils)
stamp=$( { sha256sum < "$tarball"; printf '%s\n' "${FLAGS[@]}"; } | sha256sum | cut -c1-12)
prefix=$cache/$version-$stamp

if [ -f "$prefix/.jobtrail-stamp" ] && [ "$(cat "$prefix/.jobtrail-stamp")" = "$stamp" ] && [ -x "$prefix/sbin/slurmd" ]; then
    log "reusing $prefix"
    echo "$prefix"
    exit 0
fi

missing=()
for p in "${DEPS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends \
        "${missing[@]}" >/dev/null
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9  # another run building the same release waits, then reuses it
if [ -f "$prefix/.jobtrail-stamp" ] && [ "$(cat "$prefix/.jobtrail-stamp")" = "$stamp" ]; then
    echo "$prefix"
    exit 0
fi
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
rm -rf "$prefix"
t0=$(date +%s)
log "building $version into $prefix (configure about 1 min, make 8-17 min on 2 cores)"
tar -C "$work" -xJf "$tarball"
cd "$work/$version"
./configure --prefix="$prefix" --sysconfdir="$prefix/etc" "${FLAGS[@]}" > "$work/configure.log" 2>&1 ||
    { tail -40 "$work/configure.log" >&2; log "configure failed"; exit 1; }
t1=$(date +%s)
make -j"$(nproc)" > "$work/make.log" 2>&1 || { tail -40 "$work/make.log" >&2; log "make failed"; exit 1; }
make install > "$work/install.log" 2>&1 || { tail -40 "$work/install.log" >&2; log "make install failed"; exit 1; }
t2=$(date +%s)
echo "$stamp" > "$prefix/.jobtrail-stamp"
log "built $version: configure $((t1 - t0)) s, make + install $((t2 - t1)) s"
echo "$prefix"
