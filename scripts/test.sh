#!/usr/bin/env bash
# Runs every test: the C++ suite (warnings as errors), the C++ suite again
# under AddressSanitizer + UndefinedBehaviorSanitizer, the fuzzers for a
# bounded time (saved crashers replayed), then the Python suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

JOBS=$(nproc)
# Record indexes the tests' readers build go to a scratch directory, not ~/.cache.
LMDBLOADER_INDEX_DIR=$(mktemp -d)
export LMDBLOADER_INDEX_DIR
trap 'rm -rf "$LMDBLOADER_INDEX_DIR"' EXIT
echo "== C++ tests (Release, -Wall -Wextra -Werror)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLMDBLOADER_WERROR=ON -DLMDBLOADER_BUILD_BENCHMARKS=ON
cmake --build build -j "$JOBS"
ctest --test-dir build --output-on-failure -j "$JOBS"

echo "== C++ tests under ASan + UBSan"
# clang, with libFuzzer's instrumentation: the fuzzers below are built in the
# same folder, so the library is compiled once for both.
CC=clang CXX=clang++ cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLMDBLOADER_WERROR=ON \
  -DLMDBLOADER_SANITIZE=ON -DLMDBLOADER_BUILD_FUZZERS=ON
cmake --build build-sanitize -j "$JOBS"
# The budget tests run on a smaller corpus here: the sanitizers slow every read.
LMDBLOADER_TEST_CORPUS_MIB=64 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-sanitize --output-on-failure -j "$JOBS"

echo "== What lmdbloader installs: a C++ consumer of the installed prefix, the wheel in a fresh venv"
LMDBLOADER_BUILD_DIR=build bash scripts/check_install.sh

echo "== Fuzzing (bounded: libFuzzer harnesses, then mutated whole databases)"
FUZZ_BUILD_DIR=build-sanitize bash scripts/fuzz.sh

echo "== Python tests"
PATH="$PWD/build:$PATH" python3 -m pytest -q --durations=15 tests/python
