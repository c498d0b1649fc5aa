#!/usr/bin/env bash
# The README's main command run by a user who is not root (the README says "as root": the demo
# runs slurmd and mounts the kernel-log fixture): it must stop before it starts or builds
# anything, and say why, instead of failing halfway with a lab left behind.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
rc=0
(cd "$src" && timeout 120 setpriv --reuid=65534 --regid=65534 --clear-groups \
    env JOBTRAIL_DEMO_DIR="$work/demo" bash scripts/demo.sh) > "$work/demo.log" 2>&1 || rc=$?
cat "$work/demo.log"
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then echo "demo as uid 65534 exited $rc"; exit 1; fi
grep -q "run it as root" "$work/demo.log" || { echo "the demo did not say it needs root"; exit 1; }
[ ! -e "$work/demo" ] || { echo "the demo started a lab in $work/demo before refusing"; exit 1; }
echo "demo as a user: refused at once, nothing started"
