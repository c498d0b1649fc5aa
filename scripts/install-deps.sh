#!/usr/bin/env bash
# Installs everything jobtrail needs to build, test and run on Debian 12, from Debian's packages.
set -euo pipefail
PACKAGES=(
  # toolchain
  g++ cmake pkg-config make dpkg-dev clang libclang-rt-14-dev clang-format clang-tidy python3
  # libraries
  libslurm-dev libyaml-cpp-dev nlohmann-json3-dev libfmt-dev libspdlog-dev libcli11-dev libre2-dev
  libisal-dev libsystemd-dev libzstd-dev libcurl4-openssl-dev libsnappy-dev libprotobuf-dev protobuf-compiler libarchive-dev libssl-dev zstd
  # tests: real Slurm, the kmsg fixture (FUSE), bats, the Loki test double's decoders
  slurmctld slurmd slurm-client munge catch2 libfuse3-dev fuse3 bats python3-protobuf python3-snappy python3-yaml iproute2
  # the journald source test writes journal files with systemd-journal-remote
  systemd-journal-remote
  # the CLI tests: report.html in headless chromium
  chromium
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm for the JavaScript test tools (Grafana's LogQL grammar, playwright-core), from
# Debian unless the machine already has them.
command -v npm >/dev/null || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  made_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    # The slurm and munge packages must not start their default daemons: tests run their own.
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    made_policy=1
  fi
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
  if [ $made_policy -eq 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
fi

# npm packages the tests use, at the versions package-lock.json pins.
JS_DIR="$(cd "$(dirname "$0")/.." && pwd)/tests/js"
if [ ! -d "$JS_DIR/node_modules/@grafana/lezer-logql" ] || [ ! -d "$JS_DIR/node_modules/playwright-core" ]; then
  echo "install-deps: npm ci in tests/js" >&2
  (cd "$JS_DIR" && npm ci --no-audit --no-fund --loglevel=error)
fi
exit 0
