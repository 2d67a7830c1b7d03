#!/usr/bin/env bash
# Runs every test: the Release build (gcc, warnings as errors) with its memory
# budget test on a corpus 16x the budget, the C++ suite under AddressSanitizer
# + UndefinedBehaviorSanitizer, what lmdbloader installs, then the Python suite
# over the wheel setup.sh installed, with the fuzzers (saved crashers
# replayed, then a bounded time) beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's heading says when it began (minutes:seconds into the run) and
# how busy the machine's cores were since the last heading (from /proc/stat),
# so a slow stage, or one that leaves cores idle, shows in CI's log.
busy_prev=0 total_prev=0
stage() {
  local cpu user nice sys idle iowait rest busy total share=""
  read -r cpu user nice sys idle iowait rest </proc/stat
  busy=$((user + nice + sys)) total=$((user + nice + sys + idle + iowait))
  [ "$total_prev" = 0 ] || share=" (cores $((100 * (busy - busy_prev) / (total - total_prev + 1)))% busy since the last heading)"
  busy_prev=$busy total_prev=$total
  printf '== [%d:%02d] %s%s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*" "$share"
}
stage "Setup (scripts/setup.sh)"
bash scripts/setup.sh

JOBS=$(nproc)
# The library is compiled twice below (Release, then the sanitizers): where
# ccache is installed (setup.sh installs it), a clone run again, or another
# clone on the same machine, reuses what an earlier run compiled. Paths are
# taken relative to this folder, so clones elsewhere share the cache.
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR="$PWD"
fi
# Record indexes the tests' readers build go to a scratch directory, not ~/.cache.
LMDBLOADER_INDEX_DIR=$(mktemp -d)
export LMDBLOADER_INDEX_DIR
trap 'rm -rf "$LMDBLOADER_INDEX_DIR"' EXIT
stage "Release build (gcc, -Wall -Wextra -Werror): library, command, benchmarks, budget test"
# The whole C++ suite runs under the sanitizers below; here, without them,
# only what needs the Release build: the memory budget against the kernel's
# count on a 512 MiB corpus (the sanitizers' shadow memory would blur it),
# and the command the Python suite runs.
# The Python suite imports the wheel setup.sh just installed, built from this
# checkout's sources (its cache key is their content; a test compares the
# installed modules with the tree's): what users install, and the extension
# is not compiled a third time here (~40 s of the run). The extension's
# target stays configured for tests/python/tree_package.py, which builds it
# when the suite is run from the tree (python3 -m pytest).
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLMDBLOADER_WERROR=ON -DLMDBLOADER_BUILD_BENCHMARKS=ON \
  -DLMDBLOADER_BUILD_PYTHON=ON -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" -DPython_EXECUTABLE="$(command -v python3)"
cmake --build build -j "$JOBS" --target lmdbloader_cli reader_bench image_bench residency_test
ctest --test-dir build --output-on-failure -j "$JOBS" -R '^ValueSizes/ResidencyTest\.'

stage "C++ tests under ASan + UBSan"
# clang, with libFuzzer's instrumentation: the fuzzers below are built in the
# same folder, so the library is compiled once for both.
# No command here: no C++ test runs it (the Python suite runs the Release one).
CC=clang CXX=clang++ cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLMDBLOADER_WERROR=ON \
  -DLMDBLOADER_SANITIZE=ON -DLMDBLOADER_BUILD_FUZZERS=ON -DLMDBLOADER_BUILD_TOOLS=OFF
cmake --build build-sanitize -j "$JOBS"
# The budget tests run on a smaller corpus here: the sanitizers slow every read.
LMDBLOADER_TEST_CORPUS_MIB=64 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-sanitize --output-on-failure -j "$JOBS"

stage "What lmdbloader installs: a C++ consumer of the installed prefix, the wheel in a fresh venv"
# Alone: under CI=true it turns io_uring off for the whole system for a while.
LMDBLOADER_BUILD_DIR=build bash scripts/check_install.sh

# The fuzzers keep one core busy for a fixed time; the Python suite leaves
# most of a core idle (workers starting, subprocesses, I/O), so they share the
# machine. Their output follows the suite's.
stage "Fuzzing (bounded: libFuzzer harnesses, then mutated whole databases), beside the Python tests"
fuzz_log=$(mktemp)
# 6 s a harness here (fuzz.sh's default is 10): each run starts again from
# the seeds, and the saved regressions are replayed in full either way.
setsid env FUZZ_BUILD_DIR=build-sanitize FUZZ_SECONDS=6 bash scripts/fuzz.sh >"$fuzz_log" 2>&1 &
fuzz_pid=$!
# Should a test fail, the fuzzers (their own process group) stop with the run.
trap '[ -z "$fuzz_pid" ] || kill -- -"$fuzz_pid" 2>/dev/null || true; rm -rf "$LMDBLOADER_INDEX_DIR" "$fuzz_log"' EXIT

stage "Python tests"
# First, one at a time, those that read what the whole system shares
# (/proc/meminfo and /dev/shm, which the fuzzers never touch; a thread's share
# of the CPU, measured with a margin that one busy core leaves intact), then
# the rest two at a time.
export PATH="$PWD/build:$PATH" LMDBLOADER_TEST_INSTALLED=1
python3 -m pytest -q -m serial tests/python
stage "Python tests, two at a time"
python3 -m pytest -q -n "$JOBS" -m "not serial" --durations=15 tests/python

fuzz_rc=0
wait "$fuzz_pid" || fuzz_rc=$?
fuzz_pid=""
stage "Fuzzing: what it printed"
cat "$fuzz_log"
stage "Done"
[ "$fuzz_rc" = 0 ] || { echo "fuzzing failed (exit status $fuzz_rc)"; exit 1; }
