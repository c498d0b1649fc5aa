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

# Everything else, with sanitizers.
cmake -S . -B build-asan -DJOBTRAIL_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-asan -j"$JOBS"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir build-asan --output-on-failure -j"$JOBS"

# The Debian packages, as operators install them: built without sanitizers, installed with dpkg,
# then the real-Slurm integration tests again against the installed paths (not the build tree)
# and the deliverables test with the packages' file lists.
cmake -S . -B build-pkg -DCMAKE_BUILD_TYPE=RelWithDebInfo -DJOBTRAIL_TESTS=OFF >/dev/null
cmake --build build-pkg -j"$JOBS"
rm -f build-pkg/*.deb
(cd build-pkg && cpack -G DEB >/dev/null)
for d in build-pkg/*.deb; do echo "package: $d"; dpkg-deb -f "$d" Package Version Depends; done
DEBIAN_FRONTEND=noninteractive dpkg -i build-pkg/jobtrail-node_*.deb build-pkg/jobtrail-cli_*.deb
# (No JOBTRAIL_* variable here: jobs inherit the environment, and the tests check their JOBTRAIL_*.)
JT_INSTALLED=1 ctest --test-dir build-asan --output-on-failure -L integration
JOBTRAIL_DEBS=$PWD/build-pkg ctest --test-dir build-asan --output-on-failure -R deliverables
