#!/usr/bin/env bash
# Builds the binary wheel of the Python that runs this script ($PYTHON, else
# python3), for x86_64: dist/lmdbloader-<version>-cpXY-cpXY-manylinux_2_28_x86_64.whl
# (RHEL/Rocky 8, Ubuntu 20.04, Debian 11 and newer), which needs no system
# package at run time, and the sdist beside it. The recipe, shared with
# scripts/wheels.sh (every Python, both architectures), is
# scripts/wheel_recipe.sh; what it builds is cached in build-deps/.
# Usage: bash scripts/wheel.sh [--no-sdist]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
source scripts/wheel_recipe.sh

wheel_tools
wheel_arch x86_64
version=$($PY -c 'import sys; print("%d.%d" % sys.version_info[:2])')
# A wheel this machine built before from the same sources (another clone, or
# the README's setup before the test run) is taken from the cache instead of
# being built again: building the libraries, the core and the extension is
# most of a fresh clone's setup. The key hashes the content of every file of
# the checkout that the wheel is built from (all but the tests, the scripts
# that run them, benchmarks, fuzzers and docs), uncommitted edits and new
# files included, and the toolchain's version; outside a git checkout
# nothing is cached.
cache=${LMDBLOADER_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lmdbloader/wheels}
key=""
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=$(git ls-files -co --exclude-standard -- . ':!tests' ':!bench' ':!fuzz' ':!docs' ':!.ci' \
            ':!scripts/test.sh' ':!scripts/fuzz.sh' ':!scripts/check_install.sh' |
          sort | while IFS= read -r f; do [ -f "$f" ] && printf '%s\n' "$f"; done)
  key=$( { echo "cp${version/./} $PLAT $("$ZIG" version)"
           paste -d ' ' <(printf '%s\n' "$files") <(printf '%s\n' "$files" | git hash-object --stdin-paths); } |
         sha256sum | cut -c1-24)
fi
cached=""
[ -z "$key" ] || cached=$(ls "$cache/$key"/lmdbloader-*.whl 2>/dev/null | head -1 || true)
if [ -n "$cached" ]; then
  rm -f dist/lmdbloader-*-"cp${version/./}-cp${version/./}-$PLAT".whl
  cp "$cached" dist/
  WHEEL=dist/$(basename "$cached")
  echo "wheel: $WHEEL, built before from these sources ($cache/$key)"
else
  wheel_libs
  wheel_core
  wheel_python "$version" "$($PY -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
  if [ -n "$key" ]; then
    # Written whole, then renamed: a run stopped halfway leaves no wheel there.
    mkdir -p "$cache" && tmp=$(mktemp -d "$cache/.tmp.XXXXXX")
    cp "$WHEEL" "$tmp/" && rm -rf "${cache:?}/$key" && mv "$tmp" "$cache/$key"
    # The eight newest builds are kept.
    ls -dt "$cache"/*/ | tail -n +9 | xargs -r rm -rf
  fi
fi
$PY -m auditwheel show "$WHEEL" | sed -n '1,2p'
[ "${1:-}" = "--no-sdist" ] || wheel_sdist
