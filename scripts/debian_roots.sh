# Debian's packages of other suites and architectures, unpacked into
# folders under build-roots/ (git-ignored; $LMDBLOADER_ROOTS_DIR): sid's
# Python 3.14 headers for the wheels, and what checks the wheels where this
# machine has no interpreter of their own (scripts/check_wheels.sh): sid's
# amd64 python3.14 as a chroot, bookworm's, trixie's and sid's arm64 Pythons
# as sysroots for qemu-user, and qemu-user itself. Each is fetched with
# `apt-get download` under an apt state of its own and unpacked with
# `dpkg -x`: nothing is installed into the system, the system's apt
# configuration is left as it was, and no architecture is added to dpkg.
# Sourced; the caller sets ROOT (the source tree).

ROOTS=$(realpath -m "${LMDBLOADER_ROOTS_DIR:-$ROOT/build-roots}")

# debian_root SUITE ARCH PACKAGE...: sets DEBIAN_ROOT to a folder holding
# the packages and everything they depend on (Depends and Pre-Depends, not
# Recommends), unpacked; made again when the list of packages changes.
debian_root() {
  local suite=$1 arch=$2; shift 2
  DEBIAN_ROOT=$ROOTS/$suite-$arch
  [ "$(cat "$DEBIAN_ROOT/.packages" 2>/dev/null)" = "$*" ] && return 0
  echo "roots: unpacking Debian $suite's $* ($arch) into $DEBIAN_ROOT"
  local state=$ROOTS/apt/$suite-$arch
  local apt=(-o Dir::Etc::SourceList="$state/sources.list" -o Dir::Etc::SourceParts="$state/parts"
             -o Dir::Etc::Preferences="$state/preferences" -o Dir::Etc::PreferencesParts="$state/parts"
             -o Dir::State::Lists="$state/lists" -o Dir::State::status="$state/status"
             -o Dir::Cache="$state/cache" -o APT::Architecture="$arch" -o APT::Architectures::="$arch")
  [ "$(id -u)" = 0 ] && apt+=(-o APT::Sandbox::User=root)  # else apt warns that _apt cannot write here
  rm -rf "$state" "$DEBIAN_ROOT"
  mkdir -p "$state/parts" "$state/lists/partial" "$state/cache/archives/partial" "$state/debs" "$DEBIAN_ROOT"
  touch "$state/status" "$state/preferences"  # nothing installed: every dependency is fetched
  echo "deb [arch=$arch signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main" \
    >"$state/sources.list"
  apt-get "${apt[@]}" update -q >"$state/apt.log" 2>&1 || { cat "$state/apt.log"; exit 1; }
  # The closure; virtual packages (<debconf-2.0>) are provided by others in it.
  local closure
  closure=$(apt-cache "${apt[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
              --no-breaks --no-replaces --no-enhances "$@" | grep -v '^[ <]' | sort -u)
  (cd "$state/debs" && apt-get "${apt[@]}" download $closure >>"$state/apt.log" 2>&1) ||
    { cat "$state/apt.log"; exit 1; }
  local deb dir
  for deb in "$state"/debs/*.deb; do
    dpkg -x "$deb" "$DEBIAN_ROOT"
  done
  rm -rf "$state/debs"
  # Packages of a merged /usr (trixie on) ship /usr/lib only; the links that
  # the loader's path (/lib64/ld-linux-x86-64.so.2) goes through are made
  # at installation, so here.
  for dir in bin sbin lib lib64; do
    if [ -e "$DEBIAN_ROOT/usr/$dir" ] && [ ! -e "$DEBIAN_ROOT/$dir" ]; then ln -s "usr/$dir" "$DEBIAN_ROOT/$dir"; fi
  done
  echo "$*" >"$DEBIAN_ROOT/.packages"
}

# sid's amd64 root: the python3.14 the set's x86_64 cp314 wheel runs on (a
# chroot), its venv module, its headers that build the cp314 wheels, and
# libstdc++, which numpy's wheels need from the system.
SID_PYTHON=(python3.14 python3.14-venv libpython3.14-dev libstdc++6)

# python_headers VERSION: sets PYTHON_HEADERS to a folder with CPython
# VERSION's Python.h and pyconfig.h: pyenv's for 3.10-3.13 (as built on
# this machine), sid's libpython3.14-dev for 3.14, whose pyconfig.h only
# picks the architecture's own (this one's is put in its place).
python_headers() {
  local version=$1
  PYTHON_HEADERS=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}/versions/$version".*/include/python"$version" 2>/dev/null |
                   tail -1 || true)
  [ -n "$PYTHON_HEADERS" ] && return 0
  [ "$version" = 3.14 ] || { echo "roots: no headers of CPython $version: pyenv install $version"; exit 1; }
  debian_root sid amd64 "${SID_PYTHON[@]}"
  PYTHON_HEADERS=$DEBIAN_ROOT/python$version-include  # made again with the root
  if [ ! -f "$PYTHON_HEADERS/Python.h" ]; then
    rm -rf "$PYTHON_HEADERS" && cp -r "$DEBIAN_ROOT/usr/include/python$version" "$PYTHON_HEADERS"
    cp "$DEBIAN_ROOT/usr/include/x86_64-linux-gnu/python$version/pyconfig.h" "$PYTHON_HEADERS/"
  fi
}

# qemu_user: sets QEMU to Debian 12's qemu-aarch64-static (a static binary).
qemu_user() {
  debian_root bookworm amd64 qemu-user-static
  QEMU=$DEBIAN_ROOT/usr/bin/qemu-aarch64-static
  [ -x "$QEMU" ] || { echo "roots: no $QEMU"; exit 1; }
}

# wheelhouse TAG ARCH: sets WHEELHOUSE to a folder of PyPI's wheels of what
# the smoke test imports beside lmdbloader (numpy, msgpack, py-lmdb,
# Pillow) for CPython TAG (cp313) on ARCH, fetched once.
wheelhouse() {
  local tag=$1 arch=$2
  WHEELHOUSE=$ROOTS/wheelhouse/$tag-$arch
  [ -f "$WHEELHOUSE/.done" ] && return 0
  rm -rf "$WHEELHOUSE" && mkdir -p "$WHEELHOUSE"
  # pip takes each tag as it is named: the older policy too, for wheels that
  # name only it (numpy 2.2 for 3.10).
  $PY -m pip download -q --only-binary=:all: --platform "manylinux_2_28_$arch" \
    --platform "manylinux2014_$arch" --implementation cp \
    --python-version "3.${tag#cp3}" --abi "$tag" -d "$WHEELHOUSE" \
    numpy msgpack lmdb pillow >"$ROOTS/wheelhouse/$tag-$arch.log" 2>&1 ||
    { cat "$ROOTS/wheelhouse/$tag-$arch.log"; exit 1; }
  touch "$WHEELHOUSE/.done"
}
