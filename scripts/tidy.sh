#!/usr/bin/env bash
# clang-tidy (.clang-tidy at the root) over jobtrail's sources, with the compile commands of a
# build directory. GCC-only warning flags in those commands are not clang-tidy's business.
#   scripts/tidy.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
mapfile -t files < <(git ls-files 'lib/*.cpp' 'prolog/*.cpp' 'epilog/*.cpp' 'spank/*.cpp' 'shipper/*.cpp' 'cli/*.cpp' | grep -v '_test.cpp$')
clang-tidy -p "$B" --quiet --extra-arg=-Wno-unknown-warning-option "${files[@]}" 2>&1 | grep -E '^/.*(warning|error):' && exit 1
echo "clang-tidy: quiet on ${#files[@]} files"
