#!/usr/bin/env bash
# Installs what lmdbloader needs on a fresh Debian 12 machine: C++ libraries
# from Debian, Python packages from PyPI (torch pinned first, so pip never
# resolves an open range to a CUDA build), then the package itself, from the
# manylinux wheel that scripts/wheel.sh builds.
# Idempotent: a second run installs nothing new.
set -euo pipefail
cd "$(dirname "$0")/.."

DEBS=(build-essential cmake ninja-build pkg-config liblmdb-dev lmdb-utils libmsgpack-cxx-dev
      libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
      libxxhash-dev liburing-dev libjpeg62-turbo-dev clang llvm fio nasm dpkg-dev libfuse3-dev fuse3 ccache)
source scripts/debian_packages.sh
install_missing_debs setup "${DEBS[@]}"

PY=${PYTHON:-python3}
if ! $PY -c "import torch, sys; sys.exit(0 if torch.__version__.startswith('2.13.0') else 1)" 2>/dev/null; then
  echo "setup: installing torch==2.13.0"
  $PY -m pip install -q torch==2.13.0
fi
# pip runs only when something is missing (resolving a satisfied list takes
# it 10-15 s): scripts/requirements_met.py checks the installed versions.
$PY scripts/requirements_met.py requirements-dev.txt ||
  $PY -m pip install -q -c constraints.txt -r requirements-dev.txt
# DeePMD-kit's LmdbDataReader, the reference the deepmd/lmdb tests compare
# against: what it imports is in requirements-dev.txt, the rest is not needed.
$PY scripts/requirements_met.py "deepmd-kit==3.2.*" ||
  $PY -m pip install -q --no-deps -c constraints.txt "deepmd-kit==3.2.*"
# The package is installed from the wheel users get (scripts/wheel.sh): the
# tests run what ships, and scripts/check_install.sh reuses the same build.
echo "setup: building the lmdbloader wheel (scripts/wheel.sh) and installing it"
PYTHON=$PY bash scripts/wheel.sh --no-sdist
tag=$($PY -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
$PY -m pip install -q --no-deps --force-reinstall dist/lmdbloader-*-"$tag-$tag"-manylinux_2_28_x86_64.whl
