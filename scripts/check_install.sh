#!/usr/bin/env bash
# Checks what lmdbloader installs, as its users consume it (run by
# scripts/test.sh): the C++ library installed to a prefix and found by a fresh
# CMake project (find_package(lmdbloader CONFIG)), which compiles every
# installed header on its own and builds and reads a database; and `pip wheel
# .` installed into a fresh virtual environment, where the package imports and
# the `lmdbloader` command is on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
JOBS=$(nproc)

echo "== install to a prefix, build a consumer with find_package"
cmake -S . -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLMDBLOADER_BUILD_TESTS=OFF \
  -DCMAKE_INSTALL_PREFIX="$work/prefix" >/dev/null
cmake --build "$work/build" -j "$JOBS" >/dev/null
cmake --install "$work/build" >/dev/null
cmake -S tests/consumer -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
# The consumer compiled each installed header alone: as many as the source has.
units=$(ls "$work/consumer/headers" | wc -l)
headers=$(ls include/lmdbloader/*.h | wc -l)
[ "$units" = "$headers" ] || { echo "consumer compiled $units headers alone, the package has $headers"; exit 1; }
echo "consumer: each of the $headers installed headers compiles on its own"
python3 - "$work/db" <<'PY'
import sys, lmdb
with lmdb.open(sys.argv[1], map_size=1 << 20) as env, env.begin(write=True) as txn:
    for i in range(10):
        txn.put(b"k%d" % i, b"v" * i)
PY
out=$("$work/consumer/consumer" "$work/db")
[ "$out" = "10 records, 45 bytes" ] || { echo "consumer printed: $out"; exit 1; }
echo "consumer: $out"

echo "== pip wheel, installed into a fresh virtual environment"
python3 -m pip wheel -q --no-build-isolation --no-deps -w "$work/wheels" . >/dev/null
python3 -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install -q --no-deps --force-reinstall "$work"/wheels/lmdbloader-*.whl
(cd "$work" && "$work/venv/bin/python" -c "import lmdbloader, sys; r = lmdbloader.Reader(sys.argv[1]); assert len(r) == 10; print('wheel imports from', lmdbloader.__file__)" "$work/db")
PATH="$work/venv/bin:$PATH" command -v lmdbloader | grep -q "$work/venv/bin/lmdbloader"
PATH="$work/venv/bin:$PATH" lmdbloader stat "$work/db" >/dev/null
echo "wheel: the lmdbloader command is on the venv's PATH"
