"""What the tests import is this tree: every module of the package is the
tree's file, the extension was built from the tree's sources after their
last change, and a process the tests start imports the same. Under
LMDBLOADER_TEST_INSTALLED=1 (scripts/test.sh, after setup.sh installed the
wheel it built from this checkout), the installed modules are the tree's
files byte for byte. Either way, the Release build's AVX2 objects define
strong symbols only."""

import glob
import os
import subprocess
import sys

import pytest

import lmdbloader
from conftest import TREE_PACKAGE
from tree_package import ROOT, SOURCE

tree_only = pytest.mark.skipif(TREE_PACKAGE is None, reason="LMDBLOADER_TEST_INSTALLED=1: the installed package")
# The Release build folder (scripts/test.sh's build/, tree_package's).
BUILD = os.path.realpath(os.environ.get("LMDBLOADER_TEST_BUILD_DIR", os.path.join(ROOT, "build")))


@tree_only
def test_every_module_is_the_trees_file():
    imported = {}
    for name, module in list(sys.modules.items()):
        if (name == "lmdbloader" or name.startswith("lmdbloader.")) and getattr(module, "__file__", None):
            imported[name] = os.path.realpath(module.__file__)
    assert imported["lmdbloader"] == os.path.join(SOURCE, "__init__.py")
    for name, path in imported.items():
        if name == "lmdbloader._core":
            continue
        assert path.startswith(SOURCE + os.sep), f"{name} comes from {path}, not the tree"


@tree_only
def test_the_extension_is_newer_than_every_source_it_is_built_from():
    core = os.path.realpath(lmdbloader._core.__file__)
    assert os.path.dirname(os.path.dirname(core)) == os.path.realpath(os.path.join(TREE_PACKAGE, "..")), core
    built = os.path.getmtime(core)
    sources = [p for folder in ("src", "include", "bindings") for p in glob.glob(os.path.join(ROOT, folder, "**", "*"),
                                                                              recursive=True)
               if p.endswith((".cc", ".h"))]
    stale = [p for p in sources if os.path.getmtime(p) > built]
    assert not stale, f"_core is older than {stale[:3]}"


@pytest.mark.skipif(TREE_PACKAGE is not None, reason="the tree's package is imported")
def test_the_installed_modules_are_the_trees_files():
    installed = os.path.dirname(os.path.realpath(lmdbloader.__file__))

    def modules(folder):
        found = {}
        for path in glob.glob(os.path.join(folder, "**", "*.py"), recursive=True):
            with open(path, "rb") as f:
                found[os.path.relpath(path, folder)] = f.read()
        return found

    tree, there = modules(SOURCE), modules(installed)
    assert tree
    # Both ways: a module the tree dropped, left in the installed package, is stale too.
    stale = sorted(name for name in tree.keys() | there.keys() if tree.get(name) != there.get(name))
    assert not stale, f"the installed package ({installed}) is not this tree's: {stale[:3]} differ (run scripts/setup.sh)"


@tree_only
def test_a_started_process_imports_the_tree_too():
    out = subprocess.run([sys.executable, "-c", "import lmdbloader, os; print(os.path.realpath(lmdbloader.__file__))"],
                         capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.strip() == os.path.join(SOURCE, "__init__.py")


def test_avx2_objects_define_no_weak_symbols():
    """A *_avx2.cc file alone is built with -mavx2. An inline function or a
    template it emitted (a weak symbol) could be the copy the linker keeps for
    every caller, running AVX2 instructions where the CPU has none: its
    objects define strong symbols only (its helpers have internal linkage)."""
    sources = glob.glob(os.path.join(ROOT, "src", "*", "*_avx2.cc"))
    built = os.path.join(BUILD, "CMakeFiles", "lmdbloader.dir", "src")
    if TREE_PACKAGE is None and not os.path.isdir(built):
        pytest.skip(f"no Release build of the library in {BUILD}")
    objects = glob.glob(os.path.join(built, "*", "*_avx2.cc.o"))
    assert sources and len(objects) == len(sources), (sources, objects)
    for path in objects:
        symbols = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True, check=True).stdout
        weak = [line for line in symbols.splitlines() if line.split()[1] in ("W", "V", "u", "w", "v")]
        assert not weak, f"{os.path.basename(path)} defines weak symbols: {weak[:3]}"
