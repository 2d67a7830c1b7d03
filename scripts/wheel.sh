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
wheel_libs
wheel_core
wheel_python "$($PY -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
  "$($PY -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
$PY -m auditwheel show "$WHEEL" | sed -n '1,2p'
[ "${1:-}" = "--no-sdist" ] || wheel_sdist
