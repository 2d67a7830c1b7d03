#!/usr/bin/env bash
# Fuzzing, bounded in time (run by scripts/test.sh, so by CI):
# 1. the libFuzzer harnesses named in fuzz/harnesses.txt (clang, ASan + UBSan), FUZZ_SECONDS each
#    (the three one-record parsers half that each),
#    from seeds written by fuzz/make_seeds.py, then the saved regression inputs
#    under fuzz/regressions/<harness>/ replayed;
# 2. the corruption fuzzer over whole database files (fuzz/corrupt_databases.py),
#    FUZZ_CASES mutated databases through Python and the command line.
# A crash, hang, wrong bytes or unexpected exception fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${FUZZ_SECONDS:-10}
CASES=${FUZZ_CASES:-3000}
JOBS=$(nproc)

# FUZZ_BUILD_DIR: a folder already configured with LMDBLOADER_BUILD_FUZZERS
# and LMDBLOADER_SANITIZE (scripts/test.sh's build-sanitize); else its own.
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
if [ -z "${FUZZ_BUILD_DIR:-}" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLMDBLOADER_SANITIZE=ON -DLMDBLOADER_BUILD_FUZZERS=ON -DLMDBLOADER_BUILD_TESTS=OFF \
    -DLMDBLOADER_BUILD_TOOLS=OFF -DLMDBLOADER_WERROR=ON >/dev/null
fi
cmake --build "$BUILD" -j "$JOBS"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 fuzz/make_seeds.py "$work/seeds"
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The harnesses: fuzz/harnesses.txt, the list CMake builds them from.
mapfile -t harnesses < <(grep -E '^[a-z0-9_]+$' fuzz/harnesses.txt)
for name in "${harnesses[@]}"; do
  fuzzer=$BUILD/fuzz/${name}_fuzzer
  [ -x "$fuzzer" ] || { echo "fuzz: $fuzzer was not built (is $BUILD configured from this tree?)"; exit 1; }
  # The parsers of one small record each (msgpack, Caffe's Datum, the split
  # of a record by its layout) reach their depth within seconds.
  seconds=$SECONDS_EACH
  case $name in msgpack_record | caffe_datum | image_record) seconds=$(((SECONDS_EACH + 1) / 2)) ;; esac
  saved=(fuzz/regressions/$name/*)
  if [ -e "${saved[0]}" ]; then
    echo "== $name: replaying ${#saved[@]} saved inputs"
    "$fuzzer" -runs=1 "${saved[@]}" >"$work/$name.replay.log" 2>&1 || { cat "$work/$name.replay.log"; exit 1; }
  fi
  echo "== $name: fuzzing for ${seconds}s"
  mkdir -p "$work/corpus/$name"
  if ! "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -artifact_prefix="$work/" "$work/corpus/$name" "$work/seeds/$name" >"$work/$name.log" 2>&1; then
    tail -50 "$work/$name.log"
    echo "fuzz: $name found a failing input; add it under fuzz/regressions/$name/ once fixed"
    ls "$work"/crash-* "$work"/timeout-* "$work"/leak-* "$work"/oom-* 2>/dev/null || true
    exit 1
  fi
  tail -1 "$work/$name.log"
done

echo "== corruption fuzzer: $CASES mutated databases"
PATH="$PWD/build:$PATH" python3 fuzz/corrupt_databases.py --cases "$CASES" --keep "$work/findings"
