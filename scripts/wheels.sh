#!/usr/bin/env bash
# Builds the wheel set into dist/: CPython 3.10, 3.11, 3.12, 3.13 and 3.14,
# each for x86_64 and aarch64 (manylinux_2_28: glibc 2.28 or newer), and the
# sdist; then checks each wheel where this machine can (scripts/check_wheels.sh).
# Per architecture the three libraries, the core library and the command are
# built once (scripts/wheel_recipe.sh, cached in build-deps/ and
# build-deps-aarch64/), then the extension once per Python version. The
# headers: pyenv's CPython 3.10-3.13, Debian sid's 3.14 (build-roots/).
# Usage: bash scripts/wheels.sh [--no-check]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
source scripts/wheel_recipe.sh
source scripts/debian_roots.sh

wheel_tools
for arch in x86_64 aarch64; do
  wheel_arch "$arch"
  wheel_libs
  wheel_core
  for version in 3.10 3.11 3.12 3.13 3.14; do
    python_headers "$version"
    wheel_python "$version" "$PYTHON_HEADERS"
  done
done
wheel_sdist
echo "wheels: built in $((SECONDS / 60)) min $((SECONDS % 60)) s"
ls -l dist/lmdbloader-*
[ "${1:-}" = "--no-check" ] || bash scripts/check_wheels.sh
echo "wheels: $((SECONDS / 60)) min $((SECONDS % 60)) s in all"
