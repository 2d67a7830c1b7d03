"""The package the Python tests import: this tree's, not an installed wheel.

conftest.py calls use_tree() before any test module imports lmdbloader. It
builds the extension (_core) and the command from this tree into the
Release build folder (build/, the one scripts/test.sh makes; configured
here when missing), incrementally, then lays out build/tree-package/
lmdbloader: a link to each file of python/lmdbloader and one to the built
_core, so an edited .py is what the next test run imports, and an edited
.cc is rebuilt first. The folder goes first on sys.path and on PYTHONPATH
(for the workers that spawn and forkserver start), the build folder first
on PATH (the command).

LMDBLOADER_TEST_INSTALLED=1 tests the installed package instead, as it is;
scripts/check_install.sh tests the wheel in a fresh environment either way.
"""

import fcntl
import glob
import os
import subprocess
import sys

ROOT = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
SOURCE = os.path.join(ROOT, "python", "lmdbloader")


def _run(cmd):
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"building the tree's package failed: {' '.join(cmd)}\n{done.stdout}{done.stderr}")


def _build(build):
    """Configures (once) and builds _core and the command in `build`."""
    cache = os.path.join(build, "CMakeCache.txt")
    configured = os.path.exists(cache) and "LMDBLOADER_BUILD_PYTHON:BOOL=ON" in open(cache).read()
    if not configured:
        import pybind11
        _run(["cmake", "-S", ROOT, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
              "-DLMDBLOADER_BUILD_PYTHON=ON", f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
              f"-DPython_EXECUTABLE={sys.executable}"])
    _run(["cmake", "--build", build, "--target", "_core", "lmdbloader_cli"])
    built = glob.glob(os.path.join(build, "bindings", "_core*.so"))
    if len(built) != 1:
        raise RuntimeError(f"expected one _core extension in {build}/bindings, found {built}")
    return built[0]


def _lay_out(staging, core):
    """staging/lmdbloader: links to the tree's files and to `core`; links
    to files that are gone are removed."""
    package = os.path.join(staging, "lmdbloader")
    os.makedirs(package, exist_ok=True)
    want = {name: os.path.join(SOURCE, name) for name in os.listdir(SOURCE) if name != "__pycache__"}
    want[os.path.basename(core)] = core
    for name in os.listdir(package):
        path = os.path.join(package, name)
        if name not in want or not os.path.islink(path) or os.readlink(path) != want[name]:
            if os.path.islink(path) or os.path.isfile(path):
                os.unlink(path)
    for name, target in want.items():
        path = os.path.join(package, name)
        if not os.path.islink(path):
            os.symlink(target, path)


def use_tree():
    """Puts this tree's package first; returns its folder (None when
    LMDBLOADER_TEST_INSTALLED=1)."""
    if os.environ.get("LMDBLOADER_TEST_INSTALLED") == "1":
        return None
    build = os.path.realpath(os.environ.get("LMDBLOADER_TEST_BUILD_DIR", os.path.join(ROOT, "build")))
    staging = os.path.join(build, "tree-package")
    os.makedirs(build, exist_ok=True)
    # Test processes started together (pytest-xdist's workers) build and
    # lay out one at a time; the later ones find nothing to do.
    with open(os.path.join(build, ".tree-package.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _lay_out(staging, _build(build))
    if sys.path[:1] != [staging]:
        sys.path.insert(0, staging)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != staging]
    os.environ["PYTHONPATH"] = os.pathsep.join([staging] + paths)
    os.environ["PATH"] = os.pathsep.join([build] + os.environ.get("PATH", "").split(os.pathsep))
    return staging
