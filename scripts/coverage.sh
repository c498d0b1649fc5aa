#!/usr/bin/env bash
# Line and branch coverage of lib/, per folder, from the unit and end-to-end tests (ctest -L unit,
# -L e2e; not the real-Slurm integration tests). Builds with --coverage in its own build
# directory (build-cov), installs gcovr from Debian if it is missing. Not part of CI's gate.
#   JOBS=1 bash scripts/coverage.sh      (JOBS: build parallelism, default nproc)
# Writes build-cov/coverage/summary.json and coverage.txt (per file) and prints the per-folder
# table; exits non-zero if a test failed (the figures are still printed).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
BUILD=${COVERAGE_BUILD:-build-cov}

if ! command -v gcovr >/dev/null; then
  echo "coverage: installing gcovr" >&2
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends gcovr
fi

# -fprofile-update=atomic: the shipper and the tests are multi-threaded; plain counters race and
# gcov then reports negative counts.
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug -DJOBTRAIL_SANITIZE=OFF \
  "-DCMAKE_C_FLAGS=--coverage -fprofile-update=atomic" "-DCMAKE_CXX_FLAGS=--coverage -fprofile-update=atomic" \
  -DCMAKE_EXE_LINKER_FLAGS=--coverage -DCMAKE_SHARED_LINKER_FLAGS=--coverage >/dev/null
cmake --build "$BUILD" -j"$JOBS"
find "$BUILD" -name '*.gcda' -delete

status=0
ctest --test-dir "$BUILD" --output-on-failure -j"$JOBS" -L unit || status=1
ctest --test-dir "$BUILD" --output-on-failure -L e2e || status=1

out="$BUILD/coverage"
mkdir -p "$out"
# Throw and unreachable branches are the compiler's (every call that may throw has one), not ours.
gcovr -r . --object-directory "$BUILD" --filter 'lib/' --exclude '.*_test\.cpp$' \
  --exclude-directories "$BUILD/CMakeFiles/[0-9.]+" --gcov-ignore-parse-errors \
  --exclude-throw-branches --exclude-unreachable-branches -j"$JOBS" \
  --json-summary "$out/summary.json" --txt "$out/coverage.txt" >/dev/null

python3 - "$out/summary.json" <<'PY'
import json, sys
files = json.load(open(sys.argv[1]))["files"]
folders = {}
for f in files:
    parts = f["filename"].split("/")
    key = "/".join(parts[:2]) + "/" if len(parts) > 2 else f["filename"]
    if parts[1] == "shipper" and len(parts) > 3:
        key = "/".join(parts[:3]) + "/"
    t = folders.setdefault(key, [0, 0, 0, 0])
    t[0] += f["line_covered"]; t[1] += f["line_total"]; t[2] += f["branch_covered"]; t[3] += f["branch_total"]
pct = lambda a, b: "%5.1f%%" % (100.0 * a / b) if b else "    -"
print("%-24s %15s %7s %17s %7s" % ("folder", "lines", "", "branches", ""))
tot = [0, 0, 0, 0]
for k in sorted(folders):
    t = folders[k]
    tot = [a + b for a, b in zip(tot, t)]
    print("%-24s %7d/%-7d %7s %8d/%-8d %7s" % (k, t[0], t[1], pct(t[0], t[1]), t[2], t[3], pct(t[2], t[3])))
print("%-24s %7d/%-7d %7s %8d/%-8d %7s" % ("lib/ (all)", tot[0], tot[1], pct(tot[0], tot[1]), tot[2], tot[3],
                                           pct(tot[2], tot[3])))
PY
exit $status
