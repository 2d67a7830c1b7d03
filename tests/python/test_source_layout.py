"""The source tree's shape, checked: folders of src/ are layers, tests/ mirrors
src/, no source file grows past what one reader holds in mind, the Python
package's modules are layers too (PYTHON_LAYERS), no Python module reads
another object's private members, and none takes another module's private
names (the package's naming rule: see
test_no_python_module_takes_another_modules_private_names).

Layers, bottom first: base/ (Status, options, checksums) < io/ (files,
mappings, memory probes, batched reads, rings) < lmdb/ (LMDB's page format, the
record index) < corpus/ (the corpus format, shard sets, the writer) < reader/
< convert/. image/ stands on base/ alone. A file may include its own folder's
headers and those of layers below it; a public header (include/lmdbloader/)
counts as part of the folder that implements it.
"""

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SRC = ROOT / "src"

LAYERS = ["base", "io", "lmdb", "corpus", "reader", "convert"]
# What each folder may include besides itself.
ALLOWED = {name: set(LAYERS[:i]) for i, name in enumerate(LAYERS)}
ALLOWED["image"] = {"base"}

# Each public header belongs to the folder whose sources implement it.
PUBLIC = {
    "status.h": "base", "options.h": "base",
    "memory.h": "io", "memory_budget.h": "io", "batch_ring.h": "io", "atomic_write.h": "io",
    "corpus_keys.h": "corpus", "database_info.h": "corpus", "named_databases.h": "corpus",
    "leaf_layout.h": "corpus", "lmdb_version.h": "corpus",
    "lmdb_copy.h": "corpus", "msgpack_record.h": "corpus", "caffe_datum.h": "corpus", "image_record.h": "corpus",
    "writer.h": "corpus",
    "reader.h": "reader", "record_view.h": "reader", "scan.h": "reader", "verify.h": "reader",
    "convert.h": "convert", "shard_set.h": "convert", "report_fields.h": "convert",
    "image_decode.h": "image",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
MAX_LINES = 500


def included_folder(include):
    folder, _, name = include.rpartition("/")
    if folder == "lmdbloader":
        return PUBLIC.get(name, "?" + name)
    return folder


def test_every_public_header_has_a_layer():
    names = {p.name for p in (ROOT / "include" / "lmdbloader").glob("*.h")}
    assert names == set(PUBLIC), f"public headers without a layer: {names - set(PUBLIC)}; gone: {set(PUBLIC) - names}"


def test_every_src_folder_is_a_layer():
    folders = {p.name for p in SRC.iterdir() if p.is_dir()}
    assert folders == set(ALLOWED), f"folders of src/ not in the layer list: {folders ^ set(ALLOWED)}"


def _upward_includes(files, folder_of):
    bad = []
    for path in files:
        own = folder_of(path)
        for inc in INCLUDE.findall(path.read_text()):
            if "/" not in inc:
                continue  # a header beside the file (tools/, bindings/) or a test helper
            target = included_folder(inc)
            if target != own and target not in ALLOWED[own]:
                bad.append(f"{path.relative_to(ROOT)} ({own}/) includes {inc} ({target}/)")
    return bad


def test_no_include_in_src_runs_up_a_layer():
    files = sorted(p for p in SRC.rglob("*") if p.suffix in (".h", ".cc"))
    assert len(files) > 40
    bad = _upward_includes(files, lambda p: p.relative_to(SRC).parts[0])
    assert not bad, "includes that run up a layer:\n" + "\n".join(bad)


def test_no_public_header_includes_one_above_its_layer():
    files = sorted((ROOT / "include" / "lmdbloader").glob("*.h"))
    bad = _upward_includes(files, lambda p: PUBLIC[p.name])
    assert not bad, "public headers that include a higher layer:\n" + "\n".join(bad)


def test_front_ends_include_only_public_headers():
    """The command and the binding are users of the library: they see what an installed
    package shows, and nothing of src/."""
    files = [p for d in ("tools", "bindings") for p in (ROOT / d).rglob("*") if p.suffix in (".h", ".cc")]
    bad = [f"{p.relative_to(ROOT)}: {inc}" for p in files for inc in INCLUDE.findall(p.read_text())
           if "/" in inc and not inc.startswith(("lmdbloader/", "tools/"))]
    assert not bad, "front ends reaching into src/:\n" + "\n".join(bad)


def test_tests_mirror_src():
    missing = [f"tests/{d}/" for d in ALLOWED if not (ROOT / "tests" / d / "CMakeLists.txt").is_file()]
    assert not missing, f"layers with no tests folder: {missing}"
    # A test file stands in the folder of the source it tests.
    for test in (ROOT / "tests").glob("*/*_test.cc"):
        unit = test.name[: -len("_test.cc")]
        here = test.parent.name
        sources = [p.parent.name for p in SRC.rglob(unit + ".cc")] + [p.parent.name for p in SRC.rglob(unit + ".h")]
        if sources:
            assert here in sources, f"{test.relative_to(ROOT)} tests src/{sources[0]}/{unit}: it belongs in tests/{sources[0]}/"


# Sources that are part of another unit, tested through that unit's test.
PARTS = {
    "checksum_avx2": "checksum",   # the AVX2 build of the same function, chosen at run time
    "resample_avx2": "resample",   # the resize's inner loops for AVX2, chosen at run time
    "resample_write": "resample",  # Resampler's output rows, split from resample.cc for length
    "colour_ops_avx2": "colour_ops",  # the hue's loop for AVX2, chosen at run time
    "lmdb_walk": "lmdb_pages",     # LmdbFile's walk, split from its page checks for length
    "reader_open": "reader",       # Reader's opening, split from reader.cc for length
    "reader_corpus": "reader",     # Reader's corpus checks, likewise
    "reader_keys": "reader",       # Reader's keys and lookups, likewise
    "reader_files": "reader",      # Reader's sets of files, likewise
}


def test_every_source_unit_has_a_test_of_its_own():
    untested = []
    for source in SRC.rglob("*.cc"):
        unit = PARTS.get(source.stem, source.stem)
        if not (ROOT / "tests" / source.parent.name / f"{unit}_test.cc").is_file():
            untested.append(f"src/{source.parent.name}/{source.name}")
    assert not untested, f"units with no tests/<layer>/<unit>_test.cc: {untested}"


def test_every_test_file_is_built():
    # A test file its folder's CMakeLists.txt does not name never runs.
    unbuilt = []
    for test in (ROOT / "tests").glob("*/*_test.cc"):
        listed = (test.parent / "CMakeLists.txt").read_text()
        if not re.search(rf"lmdbloader_\w*test\({test.stem}\)", listed):
            unbuilt.append(str(test.relative_to(ROOT)))
    assert not unbuilt, f"test files no CMakeLists.txt builds: {unbuilt}"


@pytest.mark.parametrize("folder", ["src", "bindings", "python"])
def test_no_source_file_over_500_lines(folder):
    long = []
    for path in (ROOT / folder).rglob("*"):
        if path.suffix in (".h", ".cc", ".py"):
            n = len(path.read_text().splitlines())
            if n > MAX_LINES:
                long.append(f"{path.relative_to(ROOT)}: {n} lines")
    assert not long, f"files over {MAX_LINES} lines:\n" + "\n".join(long)


PACKAGE = ROOT / "python" / "lmdbloader"


def _private(name):
    return name.startswith("_") and not name.startswith("__")


def _own_privates(tree):
    """The private members the module's own classes define: methods and class
    attributes, and what their methods assign to self._x."""
    own = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for node in ast.walk(cls):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(node.name):
                own.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and _private(node.id):
                own.add(node.id)
            elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _private(node.attr)
                  and isinstance(node.value, ast.Name) and node.value.id == "self"):
                own.add(node.attr)
    return own


def _private_reach(node):
    """(object, name) where `node` reads or writes a private member by name
    (obj._x, getattr(obj, "_x")), else None."""
    if isinstance(node, ast.Attribute) and _private(node.attr):
        return node.value, node.attr
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)):
        return node.args[0], node.args[1].value
    return None


def private_reaches(source):
    """Where `source` reads or writes a private member of an object other than
    self/cls that no class of its own module defines (obj._x, getattr(obj, "_x"))."""
    tree = ast.parse(source)
    own = _own_privates(tree)
    found = []
    for node in ast.walk(tree):
        reach = _private_reach(node)
        if reach is None:
            continue
        target, name = reach
        if isinstance(target, ast.Name) and target.id in ("self", "cls"):
            continue
        if name not in own:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_private_member_check_sees_a_reach():
    # The check itself, on what the dataset once did to the reader.
    assert private_reaches("class D:\n    def f(self):\n        return self.reader._c.value_sizes()\n")
    assert private_reaches("def f(txn):\n    txn._mutations += 1\n")
    assert private_reaches("def f(db):\n    return getattr(db, '_layout', None)\n")
    assert not private_reaches("class T:\n    def __init__(self):\n        self._n = 0\n"
                               "    def same(self, other):\n        return other._n\n")


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_python_module_reaches_into_another_objects_privates(path):
    # A private member is read only by the module whose class defines it;
    # what other modules need goes through public names (Reader.read_into,
    # LmdbDataset.with_deferred_batches, compat's state_of()).
    found = private_reaches(path.read_text())
    assert not found, f"{path.relative_to(ROOT)} reaches into private members: {found}"



# The package's modules by dotted name (lmdbloader, lmdbloader.compat,
# lmdbloader.compat._handles, ...); _core is the C++ extension.
MODULES = {".".join(("lmdbloader",) + p.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__"): p
           for p in PACKAGE.rglob("*.py")}
MODULES["lmdbloader._core"] = None


def _imported_from(module, is_package, node):
    """The dotted name of the module an ImportFrom in `module` reads from."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - (node.level - 1) - (0 if is_package else 1)]
    return ".".join(base + ([node.module] if node.module else []))


def private_imports(source, module, is_package=False):
    """Where `source`, the package's module `module`, takes an underscore name
    that another module of the package defines: `from .x import _name` (under
    any alias), or `x._name` / getattr(x, "_name") where x is a package module
    it imported. Importing a private module itself (`from . import _core`) is
    no such take, nor is a name from outside the package, nor a dunder."""
    tree = ast.parse(source)
    bound = {}  # local name -> the package module it stands for
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            origin = _imported_from(module, is_package, node)
            if origin.split(".")[0] != "lmdbloader":
                continue
            for alias in node.names:
                if f"{origin}.{alias.name}" in MODULES:
                    bound[alias.asname or alias.name] = f"{origin}.{alias.name}"
                elif _private(alias.name):
                    found.append(f"{node.lineno}: from {origin} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "lmdbloader":
                    local = alias.asname or "lmdbloader"
                    bound[local] = alias.name if alias.asname else "lmdbloader"

    def module_of(node):
        if isinstance(node, ast.Name):
            return bound.get(node.id)
        if isinstance(node, ast.Attribute):
            outer = module_of(node.value)
            if outer and f"{outer}.{node.attr}" in MODULES:
                return f"{outer}.{node.attr}"
        return None

    for node in ast.walk(tree):
        reach = _private_reach(node)
        if reach is None:
            continue
        target, name = reach
        origin = module_of(target)
        if origin and f"{origin}.{name}" not in MODULES:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_private_import_check_sees_a_take():
    # The check itself, on what compat's modules, vision.py and batches.py once did.
    assert private_imports("from .handles import _Database, state_of\n", "lmdbloader.compat.cursor") == [
        "1: from lmdbloader.compat.handles import _Database"]
    assert private_imports("from .errors import _MAX_KEY\n", "lmdbloader.compat.transaction")
    assert private_imports("from .cursor import Cursor, _order\n", "lmdbloader.compat", is_package=True)
    assert private_imports("from ._image_records import _fn_name as fn_name\n", "lmdbloader.vision")
    assert private_imports("def f():\n    from ._ring_main import _received_stats\n", "lmdbloader.batches")
    assert private_imports("from lmdbloader._options import _UNITS\n", "lmdbloader.reader")
    assert private_imports("from . import _options\nx = _options._UNITS\n", "lmdbloader.reader")
    assert private_imports("from .compat import _handles\nx = _handles._x\n", "lmdbloader.reader")
    assert private_imports("import lmdbloader._options as o\nx = o._UNITS\n", "lmdbloader.reader")
    assert private_imports("import lmdbloader.compat\nx = lmdbloader.compat._handles._x\n", "lmdbloader.reader")
    assert private_imports("from .. import _core\nx = getattr(_core, '_hidden')\n", "lmdbloader.compat.cursor")
    # No takes: private modules themselves, plain names (also under a private
    # alias), dunders, names from outside the package, a module's own names.
    assert not private_imports(
        "from . import _core, _dependencies\nfrom ._ring_main import Batch\nfrom .errors import Error as _Error\n"
        "from . import __version__\nimport lmdbloader._core\nx = lmdbloader._core.BatchRing\n"
        "from torch.utils.data._utils.collate import collate as _collate\n"
        "_y = 1\nz = _collate(_y)\nw = torch._C\n", "lmdbloader.batches")


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_python_module_takes_another_modules_private_names(path):
    """The package's one naming rule, for modules and the names they define:

    - A module whose name starts with an underscore (_ring_main.py,
      compat/_handles.py, the _core extension) is private to the package:
      users never import it. The names it defines for other modules of the
      package are plain, without a leading underscore.
    - A name with a leading underscore is used only in the module that
      defines it: no other module imports it (`from .x import _name`) or
      reaches it (`x._name`). Private members of objects: the check above.
    - A public module (no underscore) defines what users may use; helpers
      that several modules share live in a private module, under plain names.

    Checked here: the first two, as no `from <package module> import _name`
    and no `<package module>._name` in any module of python/lmdbloader.
    Dunder names (__version__, __all__) and names from outside the package
    (torch.utils.data._utils) are not covered."""
    module = next(name for name, p in MODULES.items() if p == path)
    found = private_imports(path.read_text(), module, is_package=path.name == "__init__.py")
    assert not found, f"{path.relative_to(ROOT)} takes other modules' private names: {found}"


# The package in layers, top first, each layer one or more groups (a public
# module with the private ones that serve it). A module imports from its own
# group and from the layers below its own, never from a layer above nor from
# another group of its layer: batches and vision stand side by side, and what
# a DecodedBatch needs of ImageDecode is batches.BatchDecoder (a Protocol),
# not an import. Lazy imports inside functions count as imports.
PYTHON_LAYERS = [
    {"front": ["lmdbloader"]},
    {"dataset": ["dataset", "_decoding"]},
    {"batches": ["batches", "_thread_loader", "_buffer_pool", "_ring_worker", "_ring_main"],
     "vision": ["vision", "_multi_crop", "_crop_jobs", "_colour_ops", "_crop_boxes", "_image_checks", "_image_records"],
     "compat": ["compat", "compat.*"]},
    {"reading": ["reader", "samples", "sampler", "writer", "_convert", "memory", "atomistic", "_decimal_keys",
                 "_size_column", "size_sampler"]},
    {"base": ["errors", "_options", "_draws", "_dependencies", "_extension", "_core"]},
]


def python_places(layers=PYTHON_LAYERS):
    """{dotted module name: (layer number from the top, group)}; "compat.*"
    stands for every module of the subpackage."""
    places = {}
    for depth, groups in enumerate(layers):
        for group, names in groups.items():
            for name in names:
                dotted = "lmdbloader" if name == "lmdbloader" else f"lmdbloader.{name}"
                if dotted.endswith(".*"):
                    prefix = dotted[:-1]
                    places.update({m: (depth, group) for m in MODULES if m.startswith(prefix)})
                else:
                    places[dotted] = (depth, group)
    return places


def package_imports(source, module, is_package=False):
    """(line, package module) of each import in `source` of a module of the
    package, at the top or inside a function: `from .x import y` reads x (or
    the module x.y), `import lmdbloader.x` reads x, importlib.import_module
    with a constant name likewise."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            origin = _imported_from(module, is_package, node)
            for alias in node.names:
                target = f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in MODULES else origin
                found.append((node.lineno, target))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args and isinstance(node.args[0], ast.Constant)):
            found.append((node.lineno, node.args[0].value))
    return [(line, target) for line, target in found if target.split(".")[0] == "lmdbloader"]


def upward_imports(source, module, is_package=False, places=None):
    """Where `source` (the package's `module`) imports from a layer above its
    own or from another group of its layer, as 'line: a (layer) imports b (layer)'."""
    places = places or python_places()
    depth, group = places[module]
    bad = []
    for line, target in package_imports(source, module, is_package):
        if target == module or target not in places:
            continue
        to_depth, to_group = places[target]
        if to_depth < depth or (to_depth == depth and to_group != group):
            where = "a layer above" if to_depth < depth else "another group of its layer"
            bad.append(f"{line}: {module} ({group}) imports {target} ({to_group}, {where})")
    return bad


def test_the_layering_check_sees_an_upward_import():
    assert upward_imports("from .dataset import LmdbDataset\n", "lmdbloader.reader")
    assert upward_imports("def f():\n    from .batches import DataLoader\n", "lmdbloader.samples")
    assert upward_imports("import lmdbloader.vision\n", "lmdbloader.errors")
    assert upward_imports("import importlib\nm = importlib.import_module('lmdbloader.dataset')\n",
                          "lmdbloader.batches")
    assert upward_imports("from ..batches import Collate\n", "lmdbloader.compat.cursor")
    assert upward_imports("from .vision import ImageDecode\n", "lmdbloader.batches"), "a sibling group"
    assert not upward_imports("from ._ring_worker import DeferredBatch\nfrom .sampler import LocalitySampler\n"
                              "from . import _core\n", "lmdbloader.batches")
    assert not upward_imports("from ._handles import state_of\nfrom ..reader import Reader\n",
                              "lmdbloader.compat.environment")


def test_every_python_module_has_a_layer():
    places = python_places()
    assert set(places) == set(MODULES), (f"modules without a layer in PYTHON_LAYERS: {set(MODULES) - set(places)}; "
                                         f"listed but gone: {set(places) - set(MODULES)}")


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_python_module_imports_from_a_layer_above_it(path):
    module = next(name for name, p in MODULES.items() if p == path)
    bad = upward_imports(path.read_text(), module, is_package=path.name == "__init__.py")
    assert not bad, f"{path.relative_to(ROOT)} imports upward:\n" + "\n".join(bad)

