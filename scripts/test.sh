#!/usr/bin/env bash
# The test command (README.md, .ci/run): installs dependencies, builds everything under
# AddressSanitizer + UndefinedBehaviorSanitizer, runs the fuzzers for a bounded time, then
# the whole CTest suite (unit tests and the real-Slurm integration tests), then builds the Debian
# packages, installs them and runs the integration tests again against what they installed.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
FUZZ_SECONDS=${FUZZ_SECONDS:-20}

bash scripts/install-deps.sh
# Everything a test needs was installed just now: with CI=true a test that cannot run here fails
# instead of being skipped (tests/support/skip.hpp, skips.py). Not a JOBTRAIL_* name: jobs inherit
# the environment, and the integration tests check their JOBTRAIL_* variables.
export CI=${CI:-true}

# Fuzzers (clang, libFuzzer + ASan/UBSan), each for FUZZ_SECONDS on its seed corpus.
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DJOBTRAIL_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j"$JOBS"
for f in build-fuzz/tests/fuzz/fuzz_*; do
  name=${f##*/fuzz_}
  work=build-fuzz/corpus-$name
  mkdir -p "$work"
  echo "fuzz: $name for ${FUZZ_SECONDS}s"
  "$f" -max_total_time="$FUZZ_SECONDS" -max_len=8192 -print_final_stats=0 "$work" "tests/fuzz/corpus/$name" \
    > "build-fuzz/$name.log" 2>&1 || { tail -40 "build-fuzz/$name.log"; echo "fuzz: $name FAILED"; exit 1; }
  grep -h "^Done" "build-fuzz/$name.log" || true
done

# A current Slurm beside Debian's 22.05: SchedMD's release in ../shared/slurm (25.11), built once per
# machine under a cache outside the clone and reused while its stamp matches; and the SPANK plugin
# for it (a plugin loads only into the Slurm major.minor it was built for), found by SLURM_ROOT
# alone, as a site with Slurm under /opt/slurm builds it.
t0=$(date +%s)
SLURM_PREFIX=$(bash scripts/build-slurm.sh)
cmake -S . -B build-slurm-current -DSLURM_ROOT="$SLURM_PREFIX" -DJOBTRAIL_SPANK=ON -DJOBTRAIL_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo | grep "SPANK plugin built for"
cmake --build build-slurm-current -j"$JOBS" --target spank_jobtrail
echo "stage: current Slurm and its plugin: $(($(date +%s) - t0)) s"

# Everything else, with sanitizers (their flags: cmake/sanitize-build.cmake); the integration tests
# run against Debian's Slurm and the current one.
t0=$(date +%s)
cmake -S . -B build-asan -C cmake/sanitize-build.cmake -DJOBTRAIL_SPANK=ON \
    -DJOBTRAIL_TEST_SLURM_PREFIX="$SLURM_PREFIX" \
    -DJOBTRAIL_TEST_SLURM_PLUGIN="$PWD/build-slurm-current/spank/spank_jobtrail.so" >/dev/null
cmake --build build-asan -j"$JOBS"
echo "stage: sanitizer build: $(($(date +%s) - t0)) s"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
t0=$(date +%s)
ctest --test-dir build-asan --output-on-failure -j"$JOBS"
echo "stage: all tests under sanitizers: $(($(date +%s) - t0)) s"

# The Debian packages, as operators install them: built without sanitizers, installed with dpkg,
# then the real-Slurm integration tests again against the installed paths (not the build tree)
# and the deliverables test with the packages' file lists.
cmake -S . -B build-pkg -DCMAKE_BUILD_TYPE=RelWithDebInfo -DJOBTRAIL_TESTS=OFF -DJOBTRAIL_SPANK=ON >/dev/null
cmake --build build-pkg -j"$JOBS"
rm -f build-pkg/*.deb
(cd build-pkg && cpack -G DEB >/dev/null)
for d in build-pkg/*.deb; do echo "package: $d"; dpkg-deb -f "$d" Package Version Depends; done
DEBIAN_FRONTEND=noninteractive dpkg -i build-pkg/jobtrail-node_*.deb build-pkg/jobtrail-cli_*.deb
# (No JOBTRAIL_* variable here: jobs inherit the environment, and the tests check their JOBTRAIL_*.)
JT_INSTALLED=1 ctest --test-dir build-asan --output-on-failure -L integration -LE "slurm[0-9]"
JOBTRAIL_DEBS=$PWD/build-pkg ctest --test-dir build-asan --output-on-failure -R deliverables
