"""What the tests import is this tree: every module of the package is the
tree's file, the extension was built from the tree's sources after their
last change, and a process the tests start imports the same."""

import glob
import os
import subprocess
import sys

import pytest

import lmdbloader
from conftest import TREE_PACKAGE
from tree_package import ROOT, SOURCE

pytestmark = pytest.mark.skipif(TREE_PACKAGE is None, reason="LMDBLOADER_TEST_INSTALLED=1: the installed package")


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


def test_the_extension_is_newer_than_every_source_it_is_built_from():
    core = os.path.realpath(lmdbloader._core.__file__)
    assert os.path.dirname(os.path.dirname(core)) == os.path.realpath(os.path.join(TREE_PACKAGE, "..")), core
    built = os.path.getmtime(core)
    sources = [p for folder in ("src", "include", "bindings") for p in glob.glob(os.path.join(ROOT, folder, "**", "*"),
                                                                              recursive=True)
               if p.endswith((".cc", ".h"))]
    stale = [p for p in sources if os.path.getmtime(p) > built]
    assert not stale, f"_core is older than {stale[:3]}"


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
    built = os.path.join(os.path.dirname(TREE_PACKAGE), "CMakeFiles", "lmdbloader.dir", "src")
    objects = glob.glob(os.path.join(built, "*", "*_avx2.cc.o"))
    assert sources and len(objects) == len(sources), (sources, objects)
    for path in objects:
        symbols = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True, check=True).stdout
        weak = [line for line in symbols.splitlines() if line.split()[1] in ("W", "V", "u", "w", "v")]
        assert not weak, f"{os.path.basename(path)} defines weak symbols: {weak[:3]}"
