#!/usr/bin/env bash
# Checks what lmdbloader installs, as its users consume it (run by
# scripts/test.sh): the C++ library installed to a prefix and found by a fresh
# CMake project (find_package(lmdbloader CONFIG)), which compiles every
# installed header on its own and builds and reads a database; and the
# manylinux wheel that scripts/wheel.sh writes, installed into a fresh virtual
# environment and run where Debian's liblmdb, liburing and libjpeg are hidden,
# once with the io engine this system allows and once with the kernel
# refusing io_uring (tests/install/wheel_check.py).
# Usage: check_install.sh [--wheel] (--wheel: the wheel only).
# LMDBLOADER_BUILD_DIR: a build folder of this tree (test.sh's build/) to
# install from, instead of building the library once more.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
JOBS=$(nproc)

# The C++ library installed to a prefix, as a CMake project consumes it.
check_prefix() {
  echo "== install to a prefix, build a consumer with find_package"
  if [ -n "${LMDBLOADER_BUILD_DIR:-}" ]; then
    # What is installed only: the folder's tests need not all be built, nor
    # its Python extension (the python component; the rest is CMake's
    # default component: library, headers, CMake package, command).
    cmake --build "$LMDBLOADER_BUILD_DIR" -j "$JOBS" --target lmdbloader lmdbloader_cli >/dev/null
    cmake --install "$LMDBLOADER_BUILD_DIR" --prefix "$work/prefix" --component Unspecified >/dev/null
  else
    cmake -S . -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLMDBLOADER_BUILD_TESTS=OFF \
      -DCMAKE_INSTALL_PREFIX="$work/prefix" >/dev/null
    cmake --build "$work/build" -j "$JOBS" >/dev/null
    cmake --install "$work/build" >/dev/null
  fi
  cmake -S tests/consumer -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
  cmake --build "$work/consumer" >/dev/null
  # The consumer compiled each installed header alone: as many as the source has.
  units=$(ls "$work/consumer/headers" | wc -l)
  headers=$(ls include/lmdbloader/*.h | wc -l)
  [ "$units" = "$headers" ] || { echo "consumer compiled $units headers alone, the package has $headers"; exit 1; }
  echo "consumer: each of the $headers installed headers compiles on its own"
  python3 -c '
import sys, lmdb
with lmdb.open(sys.argv[1], map_size=1 << 20) as env, env.begin(write=True) as txn:
    for i in range(10):
        txn.put(b"k%d" % i, b"v" * i)' "$work/db"
  out=$("$work/consumer/consumer" "$work/db")
  [ "$out" = "10 records, 45 bytes" ] || { echo "consumer printed: $out"; exit 1; }
  echo "consumer: $out"
}
[ "${1:-}" = "--wheel" ] || check_prefix

echo "== the manylinux wheel, in a fresh virtual environment, Debian's libraries hidden"
# Up to date after scripts/setup.sh (nothing to rebuild); else builds what changed.
bash scripts/wheel.sh --no-sdist >"$work/wheel.log" 2>&1 || { cat "$work/wheel.log"; exit 1; }
tag=$(python3 -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
whl=$(ls dist/lmdbloader-*-"$tag-$tag"-manylinux_2_28_x86_64.whl)
shown=$(python3 -m auditwheel show "$whl" | tr '\n' ' ')
[[ $shown == *'platform tag: "manylinux_2_28_x86_64"'* ]] || { echo "auditwheel show: $shown"; exit 1; }
# The system's site-packages give numpy, torch, PIL and py-lmdb; lmdbloader
# comes from the wheel (wheel_check.py checks where it was imported from).
python3 -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install -q --no-deps --force-reinstall "$whl"
for elf in "$work"/venv/lib/python*/site-packages/lmdbloader/_core*.so "$work/venv/bin/lmdbloader"; do
  # An unmatched glob stays literal: a missing file must fail, not pass unread.
  [ -f "$elf" ] || { echo "the wheel installed no $elf"; exit 1; }
  if readelf -d "$elf" | grep NEEDED | grep -E -v '\[(libc|libm|libdl|libpthread|librt|ld-linux-x86-64)\.so'; then
    echo "$elf needs a library outside the manylinux policy"; exit 1
  fi
done
run_hidden() {  # $1: the engine io_engine="auto" must pick
  rm -rf "$work/run" && mkdir "$work/run"
  (cd "$work/run" && PATH="$work/venv/bin:$PATH" LMDBLOADER_INDEX_DIR="$work/run" \
     bash "$ROOT/scripts/without_debian_libs.sh" "$work/venv/bin/python" "$ROOT/tests/install/wheel_check.py" "$work/run" "$1")
}
# What "auto" must pick is what this system allows, found by asking it: the
# sysctl alone does not say (a container's seccomp profile refuses
# io_uring_setup while it reads 0; at 1 root may still use io_uring). The
# wheel's own Python opens a small database outside the namespace (the mount
# namespace does not change what io_uring allows).
mkdir "$work/probe"
engine=$(cd "$work/probe" && LMDBLOADER_INDEX_DIR="$work/probe" "$work/venv/bin/python" -c '
import sys, lmdb, lmdbloader
assert lmdbloader.__file__.startswith(sys.prefix), lmdbloader.__file__
with lmdb.open("db", map_size=1 << 20) as env, env.begin(write=True) as txn:
    txn.put(b"k", b"v" * 5000)
reader = lmdbloader.Reader("db", io_engine="auto")
assert reader.get(b"k") == b"v" * 5000
print(reader.stats()["io_engine"])')
case $engine in io_uring|threads) ;; *) echo "io engine probe printed: $engine"; exit 1;; esac
echo "io_uring probe: io_engine=\"auto\" picks $engine here"
run_hidden "$engine"
uring=/proc/sys/kernel/io_uring_disabled
# Again with io_uring refused by the kernel (Linux 6.6+), as container
# seccomp profiles refuse it: the reads go through the thread engine. The
# switch is the whole machine's, so it is thrown only where asked (CI=true,
# or LMDBLOADER_CHECK_KERNEL_SWITCH=1), and the old value is restored
# whatever happens; elsewhere the library's own refusal stands in.
if [ -w $uring ] && { [ "${CI:-}" = true ] || [ "${LMDBLOADER_CHECK_KERNEL_SWITCH:-0}" = 1 ]; }; then
  old=$(cat $uring)
  trap 'echo "$old" >'$uring'; rm -rf "$work"' EXIT
  echo 2 >$uring
  run_hidden threads
  echo "$old" >$uring
  trap 'rm -rf "$work"' EXIT
else
  echo "(the kernel's switch is not thrown here: io_uring refused by LMDBLOADER_DISABLE_IO_URING instead)"
  LMDBLOADER_DISABLE_IO_URING=1 run_hidden threads
fi
PATH="$work/venv/bin:$PATH" command -v lmdbloader | grep -q "$work/venv/bin/lmdbloader"
echo "wheel: $(basename "$whl") runs without Debian's libraries; lmdbloader is on the venv's PATH"
