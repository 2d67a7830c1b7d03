"""The source tree's shape, checked: folders of src/ are layers, tests/ mirrors
src/, and no source file grows past what one reader holds in mind.

Layers, bottom first: base/ (Status, options, checksums) < io/ (files,
mappings, memory probes, batched reads, rings) < lmdb/ (LMDB's page format, the
record index) < corpus/ (the corpus format, shard sets, the writer) < reader/
< convert/. image/ stands on base/ alone. A file may include its own folder's
headers and those of layers below it; a public header (include/lmdbloader/)
counts as part of the folder that implements it.
"""

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
    "memory.h": "io", "memory_budget.h": "io", "batch_ring.h": "io",
    "corpus_keys.h": "corpus", "inspect.h": "corpus", "lmdb_copy.h": "corpus",
    "msgpack_record.h": "corpus", "writer.h": "corpus",
    "reader.h": "reader", "record_view.h": "reader", "scan.h": "reader",
    "convert.h": "convert", "report_fields.h": "convert",
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


@pytest.mark.parametrize("folder", ["src", "bindings"])
def test_no_source_file_over_500_lines(folder):
    long = []
    for path in (ROOT / folder).rglob("*"):
        if path.suffix in (".h", ".cc", ".py"):
            n = len(path.read_text().splitlines())
            if n > MAX_LINES:
                long.append(f"{path.relative_to(ROOT)}: {n} lines")
    assert not long, f"files over {MAX_LINES} lines:\n" + "\n".join(long)
