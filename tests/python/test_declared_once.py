"""Every option, enum name and reported field is written once, in the C++
core's tables, and every front end follows them: Python's keywords
(Reader, LmdbDataset, compat.open, convert), the command's flags and help,
Python's dicts and the command's JSON. Each test enumerates a table and
checks each front against it, so an option or field added to a table and
forgotten by a front fails here."""

import json
import subprocess

import pytest

import lmdbloader
import lmdbloader.compat as compat
import lmdbloader.memory
from lmdbloader import _core

READER_OPTIONS = list(_core.reader_options())  # (name, kind, values, help, default)
CONVERT_OPTIONS = list(_core.convert_options())
# compat.open: py-lmdb already names three of the Reader's options.
COMPAT_SPELLING = {"mode": "access_mode", "lock": "lock", "db": None}
# The command's convert: two positionals, --from, and its own progress rule.
CONVERT_SPELLING = {"kind": "--from", "source": None, "output": None, "progress": None}


def _flag(name):
    return "--" + name.replace("_", "-")


def _python_value(kind, text):
    """The table's default text as the Python value a user would pass."""
    if kind in ("bytes", "int"):
        return int(text)
    if kind == "bool":
        return text == "true"
    if kind == "checksums":
        return {"true": True, "false": False}.get(text, text)
    return text


def _choices(values):
    return [v.strip() for v in values.replace(" or ", ", ").split(",")]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    import lmdb

    path = str(tmp_path_factory.mktemp("declared") / "db")
    with lmdb.open(path, map_size=1 << 20) as env, env.begin(write=True) as txn:
        for i in range(4):
            txn.put(b"k%d" % i, b"v%d" % i)
    return path


def test_the_tables_are_not_empty_and_names_are_unique():
    for table in (READER_OPTIONS, CONVERT_OPTIONS):
        names = [row[0] for row in table]
        assert len(names) == len(set(names)) and len(names) >= 11, names
    assert len(READER_OPTIONS) == 13 and len(CONVERT_OPTIONS) == 13


@pytest.mark.parametrize("name,kind,values,help_,default", READER_OPTIONS, ids=[r[0] for r in READER_OPTIONS])
def test_every_reader_option_is_a_keyword_of_every_python_front(corpus, name, kind, values, help_, default):
    value = _python_value(kind, default)
    with lmdbloader.Reader(corpus, **{name: value}) as r:
        assert r.option(name) == default or name == "rss_budget", (name, r.option(name), default)
    lmdbloader.LmdbDataset(corpus, decode="tensor", **{name: value})
    spelled = COMPAT_SPELLING.get(name, name)
    if spelled is not None:
        env = compat.open(corpus, readonly=True, lock=False, **({spelled: value} if spelled != "lock" else {}))
        env.close()


def test_the_datasets_docstring_names_every_reader_option_in_the_tables_order():
    """LmdbDataset passes the reader options on to Reader and lists them by
    name in its docstring: the list is the table, no more, no less."""
    doc = " ".join(lmdbloader.LmdbDataset.__doc__.split())
    listed = doc.split("reader options of :class:`lmdbloader.Reader` (", 1)[1].split(")", 1)[0]
    assert listed.split(", ") == [row[0] for row in READER_OPTIONS], listed


def test_an_unknown_keyword_is_a_type_error_naming_the_table(corpus):
    for front in (lambda: lmdbloader.Reader(corpus, nope=1),
                  lambda: compat.open(corpus, lock=False, nope=1),
                  lambda: lmdbloader.convert(corpus, corpus + "-x", kind="lmdb", nope=1)):
        with pytest.raises(TypeError, match="nope"):
            front()


@pytest.mark.parametrize("name,kind,values,help_,default", READER_OPTIONS, ids=[r[0] for r in READER_OPTIONS])
def test_every_reader_option_is_a_flag_of_every_reading_command(name, kind, values, help_, default):
    for command in ("get", "scan", "stat", "verify"):
        out = subprocess.run(["lmdbloader", command, "--help"], capture_output=True, text=True).stdout
        assert _flag(name) in out, f"lmdbloader {command} --help lacks {_flag(name)}"
        assert values in " ".join(out.split()), f"lmdbloader {command} --help does not say {name} takes {values}"


@pytest.mark.parametrize("name,kind,values,help_,default", CONVERT_OPTIONS, ids=[r[0] for r in CONVERT_OPTIONS])
def test_every_convert_option_is_a_flag_and_a_keyword(tmp_path, name, kind, values, help_, default):
    out = " ".join(subprocess.run(["lmdbloader", "convert", "--help"], capture_output=True, text=True).stdout.split())
    flag = CONVERT_SPELLING.get(name, _flag(name))
    if flag is not None:
        assert flag in out and values in out, f"lmdbloader convert --help lacks {flag} [{values}]"
    if name in ("source", "output", "kind"):
        return  # convert()'s own arguments
    # The keyword is taken (no TypeError); the missing source is then the error.
    with pytest.raises(OSError, match="missing"):
        lmdbloader.convert(tmp_path / "missing", tmp_path / "out", kind="image_folder",
                           **{name: _python_value(kind, default)})


def test_a_bool_flag_given_false_means_false(tmp_path):
    # --flag=false is false, --flag true: the lock flag decides whether the
    # lock file appears beside a plain LMDB, and --overwrite whether an
    # existing output is replaced.
    import lmdb

    db = tmp_path / "db"
    with lmdb.open(str(db), map_size=1 << 20, lock=False) as env, env.begin(write=True) as txn:
        txn.put(b"k", b"v")
    for given, lock_file in (("--lock=false", False), ("--lock=0", False), ("--lock", True)):
        res = subprocess.run(["lmdbloader", "get", str(db), "--index", "0", given, "-o", str(tmp_path / "value")],
                             capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        assert (db / "lock.mdb").exists() == lock_file, given
    (tmp_path / "img" / "cls").mkdir(parents=True)
    (tmp_path / "img" / "cls" / "a.jpg").write_bytes(b"not decoded by convert")
    out = tmp_path / "out"
    convert = ["lmdbloader", "convert", "--from", "image_folder", str(tmp_path / "img"), str(out)]
    assert subprocess.run(convert, capture_output=True).returncode == 0
    res = subprocess.run(convert + ["--overwrite=false"], capture_output=True, text=True)
    assert res.returncode == 1 and "exists" in res.stderr, res.stderr
    assert subprocess.run(convert + ["--overwrite"], capture_output=True).returncode == 0


@pytest.mark.parametrize("table,option", [(READER_OPTIONS, "mode"), (READER_OPTIONS, "io_engine"),
                                          (READER_OPTIONS, "cache"), (CONVERT_OPTIONS, "order"),
                                          (CONVERT_OPTIONS, "kind")])
def test_each_enum_name_is_accepted_and_an_unknown_one_lists_them(corpus, tmp_path, table, option):
    values = next(row[2] for row in table if row[0] == option)
    names = _choices(values)
    if table is READER_OPTIONS:
        for n in names:
            lmdbloader.Reader(corpus, **{option: n}).close()
        with pytest.raises(ValueError, match=f"{option} must be one of {', '.join(names)}; got 'x'"):
            lmdbloader.Reader(corpus, **{option: "x"})
    else:
        kw = {"kind": "image_folder", option: "x"}
        with pytest.raises(lmdbloader.ConvertError, match=f"{option} must be one of {', '.join(names)}; got 'x'"):
            lmdbloader.convert(tmp_path, tmp_path / "out", **kw)
        if option == "kind":  # required: None is refused, not taken as the table's default
            with pytest.raises(lmdbloader.ConvertError, match=f"kind must be one of {', '.join(names)}; got 'None'"):
                lmdbloader.convert(tmp_path, tmp_path / "out", kind=None)


def test_ring_backings_are_the_cores():
    for n in ("auto", "memfd", "shm"):
        lmdbloader.Collate(backing=n)
    with pytest.raises(ValueError, match="backing must be one of auto, memfd, shm; got 'x'"):
        lmdbloader.Collate(backing="x")


def test_python_dicts_carry_exactly_the_reported_fields(corpus, tmp_path):
    fields = _core.report_fields()
    names = {struct: [f for f, _ in rows] for struct, rows in fields.items()}
    with lmdbloader.Reader(corpus) as r:
        assert list(r.stats()) == names["ReaderStats"]
    counts = lmdbloader.memory.process_memory()
    assert [k for k in counts if k not in ("pid", "name")] == names["ProcessMemory"]
    assert list(_core.inspect(corpus, "")) == names["DatabaseInfo"]
    summary = lmdbloader.convert(corpus, tmp_path / "c", kind="lmdb")
    assert list(summary) == names["ConvertSummary"]


def test_the_commands_json_carries_the_fields_it_reports(corpus, tmp_path):
    fields = _core.report_fields()

    def keys(args):
        proc = subprocess.run(["lmdbloader", *args, "--json"], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        return set(json.loads(proc.stdout))

    checked = 0
    for struct, args in (("ReaderStats", ["scan", corpus]), ("DatabaseInfo", ["stat", corpus]),
                         ("ConvertSummary", ["convert", "--from", "lmdb", corpus, str(tmp_path / "c2")])):
        got = keys(args)
        for name, key in fields[struct]:
            if key is not None:
                assert key in got, f"{' '.join(args[:1])} --json lacks {key} ({struct}::{name})"
                checked += 1
    assert checked >= 5


def test_the_image_paths_options_are_the_cores_table():
    """ImageDecode's layout, dtype and record names, its mean and std
    defaults and its size limit come from the C++ table: each name is
    accepted and documented, anything else refused with the table's list."""
    import inspect

    import torch

    table = lmdbloader._core.image_options()
    assert table["layouts"] == ["CHW", "HWC"] and table["dtypes"] == ["float32", "uint8"]
    assert table["records"] == ["msgpack", "raw", "caffe"]
    from lmdbloader import vision
    assert list(vision.RECORD_LAYOUTS) == table["records"]
    record_row = next(row for row in CONVERT_OPTIONS if row[0] == "record")
    assert all(name in record_row[2] for name in table["records"])  # the converter's names
    # mean and std default to the table's (None in the signature: one channel
    # takes 0.5 instead), and so do the filters.
    defaults = inspect.signature(lmdbloader.ImageDecode).parameters
    assert defaults["mean"].default is None and defaults["std"].default is None
    rgb = lmdbloader.ImageDecode(8)
    assert rgb.mean == tuple(table["mean"]) and rgb.std == tuple(table["std"])
    assert table["interpolations"] == ["bilinear", "bicubic"]
    assert defaults["interpolation"].default == table["interpolations"][0]
    doc = lmdbloader.ImageDecode.__doc__
    for name in table["layouts"] + table["dtypes"] + table["records"] + table["interpolations"]:
        assert name in doc, f"{name!r} is not in ImageDecode's docstring"
    for layout in table["layouts"]:
        for dtype in table["dtypes"]:
            decode = lmdbloader.ImageDecode(8, layout=layout, dtype=getattr(torch, dtype))
            assert decode.sample_shape == ((3, 8, 8) if layout == "CHW" else (8, 8, 3))
    for record in table["records"]:
        assert lmdbloader.ImageDecode(8, record=record).record == record
    with pytest.raises(ValueError, match="'CHW' or 'HWC'"):
        lmdbloader.ImageDecode(8, layout="CWH")
    with pytest.raises(ValueError, match="'msgpack', 'raw', 'caffe'"):
        lmdbloader.ImageDecode(8, record="json")
    # The colour ops: the core's names, each taken by apply_colour (the
    # code ImageDecode's jitter, gray_p and solarize_p run) and documented.
    assert table["colour_ops"] == ["brightness", "contrast", "saturation", "hue", "grayscale", "solarize", "blur"]
    import numpy as np
    for name in table["colour_ops"]:
        assert name in vision.apply_colour.__doc__, f"{name!r} is not in apply_colour's docstring"
        vision.apply_colour(np.zeros((2, 2, 3), np.uint8), [(name, 0.5, 3) if name == "blur" else (name, 0.5)])
    with pytest.raises(ValueError, match=f"colour op must be one of {', '.join(table['colour_ops'])}; got 'x'"):
        vision.apply_colour(np.zeros((2, 2, 3), np.uint8), [("x", 1.0)])
    lmdbloader.ImageDecode((table["max_side"], 1))
    with pytest.raises(ValueError, match=str(table["max_side"])):
        lmdbloader.ImageDecode(table["max_side"] + 1)
