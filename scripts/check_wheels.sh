#!/usr/bin/env bash
# Checks the wheel set in dist/ (scripts/wheels.sh runs this after building
# it), each wheel where this machine can:
# - all ten, without running them: the tag, each ELF file's architecture,
#   the libraries it needs, its newest glibc symbol (2.28 at most), stripped
#   (tests/install/wheel_static.py);
# - x86_64, CPython 3.10-3.13 (pyenv's) in a fresh virtual environment with
#   Debian's liblmdb, liburing and libjpeg hidden, and 3.14 (Debian sid's) in
#   a chroot of sid, which has none of them: the torch-free smoke test
#   (tests/install/wheel_smoke.py); cp311 also through torch, as
#   scripts/check_install.sh checks it for the test run;
# - aarch64 under qemu-user with Debian's arm64 Pythons (bookworm's 3.11,
#   trixie's 3.13, sid's 3.14) and PyPI's aarch64 wheels of numpy, msgpack,
#   py-lmdb and Pillow: the same smoke test. No arm64 interpreter of 3.10 or
#   3.12 is at hand here: those two get the checks without running only;
# - what a user gets wrong: a glibc older than 2.28 (pip finds no wheel), a
#   Python with no numpy to be had (pip installs nothing), the sdist where
#   there is no compiler (the message names what is missing and the wheels).
# Debian's packages come from scripts/debian_roots.sh (build-roots/).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
source scripts/debian_roots.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PIP_ROOT_USER_ACTION=ignore
VERSION=$($PY -c "import re; print(re.search(r'project\(lmdbloader VERSION ([0-9.]+)', open('CMakeLists.txt').read())[1])")
TAGS=(cp310 cp311 cp312 cp313 cp314)
for arch in x86_64 aarch64; do
  for tag in "${TAGS[@]}"; do
    ls "dist/lmdbloader-$VERSION-$tag-$tag-manylinux_2_28_$arch.whl" >/dev/null
  done
done
[ -f "dist/lmdbloader-$VERSION.tar.gz" ] || { echo "no dist/lmdbloader-$VERSION.tar.gz"; exit 1; }
wheel_of() { echo "$ROOT/dist/lmdbloader-$VERSION-$1-$1-manylinux_2_28_$2.whl"; }

echo "== every wheel, without running it"
$PY tests/install/wheel_static.py "$VERSION" dist/lmdbloader-"$VERSION"-*.whl

echo "== x86_64: a fresh virtual environment per Python, Debian's libraries hidden"
for tag in cp310 cp311 cp312 cp313; do
  python=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}/versions/3.${tag#cp3}".*/bin/python3 | tail -1)
  wheelhouse "$tag" x86_64
  "$python" -m venv "$work/$tag"
  "$work/$tag/bin/pip" install -q --no-index --find-links "$WHEELHOUSE" numpy msgpack lmdb pillow
  "$work/$tag/bin/pip" install -q --no-deps "$(wheel_of "$tag" x86_64)"
  mkdir "$work/$tag-run"
  (cd "$work/$tag-run" && LMDBLOADER_INDEX_DIR=$PWD bash "$ROOT/scripts/without_debian_libs.sh" \
     "$work/$tag/bin/python" "$ROOT/tests/install/wheel_smoke.py" . "$VERSION" "$work/$tag/bin/lmdbloader")
done

# sid's python3.14 runs in a chroot of sid's root (in a private mount
# namespace, with /proc and /dev), with the wheels and the smoke test copied
# into its /tmp; the root has Python and no shell. Root has CAP_SYS_CHROOT,
# anyone else as root of a user namespace.
debian_root sid amd64 "${SID_PYTHON[@]}"
sid=$DEBIAN_ROOT
wheelhouse cp314 x86_64
rm -rf "$sid/tmp" && mkdir -p "$sid/tmp/wheels" "$sid/tmp/run" "$sid/proc" "$sid/dev" && chmod 1777 "$sid/tmp"
cp "$WHEELHOUSE"/*.whl "$(wheel_of cp314 x86_64)" "$sid/tmp/wheels/"
cp tests/install/wheel_smoke.py "$sid/tmp/"
# Debian's pip loads the CA bundle even to install from a folder; the root
# has none (ca-certificates makes it at installation).
mkdir -p "$sid/etc/ssl/certs" && cp /etc/ssl/certs/ca-certificates.crt "$sid/etc/ssl/certs/"
userns=()
[ "$(id -u)" = 0 ] || userns=(-r)
unshare "${userns[@]}" -m --propagation private bash -ec '
  sid=$1 whl=/tmp/wheels/$(basename "$2") version=$3
  mount --bind /proc "$sid/proc"
  mount --rbind /dev "$sid/dev"
  in_sid() { env -i PATH=/usr/sbin:/usr/bin:/bin HOME=/tmp PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore LMDBLOADER_INDEX_DIR=/tmp/run \
               chroot "$sid" "$@"; }
  in_sid /usr/bin/python3.14 -m venv /tmp/venv
  in_sid /tmp/venv/bin/pip install -q --no-index --find-links /tmp/wheels numpy msgpack lmdb pillow
  in_sid /tmp/venv/bin/pip install -q --no-deps "$whl"
  in_sid /tmp/venv/bin/python /tmp/wheel_smoke.py /tmp/run "$version" /tmp/venv/bin/lmdbloader' \
  in-sid "$sid" "$(wheel_of cp314 x86_64)" "$VERSION"

echo "== x86_64 cp311 through torch (scripts/check_install.sh)"
bash scripts/check_install.sh --wheel | tail -4

echo "== aarch64 under qemu-user: Debian's arm64 Pythons"
qemu_user
for pair in bookworm:3.11 trixie:3.13 sid:3.14; do
  suite=${pair%:*} version=${pair#*:}
  tag=cp${version/./}
  debian_root "$suite" arm64 "python$version" libstdc++6  # numpy's wheels need libstdc++
  wheelhouse "$tag" aarch64
  site=$work/$tag-aarch64
  # The tags pick the wheels; --ignore-requires-python because pip (23.2)
  # holds Requires-Python against the Python that runs it, not --python-version.
  $PY -m pip install -q --no-index --find-links "$WHEELHOUSE" --only-binary=:all: --target "$site" \
    --platform manylinux_2_28_aarch64 --platform manylinux2014_aarch64 --python-version "$version" \
    --implementation cp --abi "$tag" --ignore-requires-python \
    numpy msgpack lmdb pillow "$(wheel_of "$tag" aarch64)" 2>"$work/pip.log" ||
    { cat "$work/pip.log"; exit 1; }
  run=("$QEMU" -L "$DEBIAN_ROOT")
  mkdir "$site-run"
  (cd "$site-run" && PYTHONPATH=$site PYTHONNOUSERSITE=1 LMDBLOADER_INDEX_DIR=$PWD \
     "${run[@]}" "$DEBIAN_ROOT/usr/bin/python$version" "$ROOT/tests/install/wheel_smoke.py" . "$VERSION" \
     "${run[@]}" "$site/bin/lmdbloader")
done
echo "(cp310, cp312 aarch64: no arm64 interpreter of 3.10 or 3.12 here; checked without running only)"

echo "== what a user gets wrong"
# glibc older than 2.28 (RHEL 7, Ubuntu 18.04): pip sees no wheel for it.
for plat in manylinux_2_17_x86_64 manylinux_2_27_aarch64; do
  if $PY -m pip install -q --dry-run --no-index --find-links dist --only-binary=:all: --no-deps \
       --target "$work/none" --platform "$plat" --python-version 3.11 lmdbloader >"$work/pip.log" 2>&1; then
    echo "pip found a wheel for $plat"; exit 1
  fi
  grep -q "No matching distribution found for lmdbloader" "$work/pip.log" || { cat "$work/pip.log"; exit 1; }
done
$PY -m pip install -q --dry-run --no-index --find-links dist --only-binary=:all: --no-deps \
  --target "$work/none" --platform manylinux_2_28_aarch64 --python-version 3.11 lmdbloader >/dev/null
echo "glibc older than 2.28: pip finds no wheel (\"No matching distribution found for lmdbloader\")"
# No numpy to be had (an offline mirror without it): pip installs nothing.
$PY -m venv "$work/bare"
if "$work/bare/bin/pip" install -q --no-index --find-links dist lmdbloader >"$work/pip.log" 2>&1; then
  echo "lmdbloader installed without numpy"; exit 1
fi
grep -q "No matching distribution found for numpy" "$work/pip.log" || { cat "$work/pip.log"; exit 1; }
if "$work/bare/bin/pip" show -q lmdbloader 2>/dev/null; then echo "half installed"; exit 1; fi
echo "no numpy to be had: pip refuses (\"No matching distribution found for numpy\"), nothing installed"
# The sdist with no compiler: the build fails with the message of
# pyproject.toml's messages.after-failure, and nothing is installed.
$PY -m venv --system-site-packages "$work/nocc"
if CC=/nonexistent/cc CXX=/nonexistent/c++ "$work/nocc/bin/pip" install --no-build-isolation --no-deps \
     "dist/lmdbloader-$VERSION.tar.gz" >"$work/pip.log" 2>&1; then
  echo "the sdist built with no compiler"; exit 1
fi
grep -q "could not be built from source" "$work/pip.log" || { cat "$work/pip.log"; exit 1; }
if "$work/nocc/bin/python" -c "import lmdbloader, sys; sys.exit(not lmdbloader.__file__.startswith(sys.prefix))" 2>/dev/null; then
  echo "half installed"; exit 1
fi
echo "sdist with no compiler: \"$(grep -m1 -o "lmdbloader could not be built from source.*" "$work/pip.log")\"" \
  "and what it needs, nothing installed"
echo "check_wheels: all checks passed"
