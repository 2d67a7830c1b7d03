"""Atomistic layouts as samples (LmdbDataset(samples="deepmd" | "aselmdb")):
corpora written by dpdata's and ASE's own writers read back equal to the
owners' own readers (dpdata's frame decoding and DeePMD-kit's
LmdbDataReader; ase_db_backends' LMDBDatabase), in their order, through a
DataLoader with workers too; the size columns; and the bad inputs, each
refused with the right exception naming the file."""

import os
import pickle
import tempfile
import zlib

import lmdb
import numpy as np
import pytest
import torch.utils.data
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lmdbloader
from atomistic_corpora import (ase_reader, deepmd_reader, dpdata_frames, write_aselmdb,  # noqa: I001
                               write_deepmd)
from lmdbloader._decimal_keys import DecimalIds

# deepmd's LmdbDataReader's names for dpdata's fields.
DEEPMD_NAMES = {"coords": "coord", "cells": "box", "energies": "energy", "forces": "force", "virials": "virial",
                "atom_types": "atype"}
ASE_ARRAYS = ("numbers", "positions", "cell", "pbc", "forces", "stress")


@pytest.fixture(scope="module")
def deepmd_db(tmp_path_factory):
    return write_deepmd(tmp_path_factory.mktemp("deepmd") / "water.lmdb", [(5, 3), (4, 7), (6, 1), (3, 7)])


@pytest.fixture(scope="module")
def ase_db(tmp_path_factory):
    # 130 rows: keys "1", "10", "100", ... so key order is not id order.
    return write_aselmdb(tmp_path_factory.mktemp("ase") / "s2ef.aselmdb", 130, deleted=(3, 10, 57, 100),
                         metadata={"source": "test", "units": "eV"})


def test_deepmd_frames_equal_dpdata_and_deepmd_readers(deepmd_db):
    ds = lmdbloader.LmdbDataset(deepmd_db, samples="deepmd", index_dir="none")
    theirs = dpdata_frames(deepmd_db)
    assert len(ds) == len(theirs) == 18
    ours = ds.__getitems__(list(range(len(ds))))
    for i, (mine, frame) in enumerate(zip(ours, theirs)):
        assert set(mine) == set(frame), f"frame {i}: fields {sorted(mine)} against {sorted(frame)}"
        for name, value in frame.items():
            if isinstance(value, np.ndarray):
                assert mine[name].dtype == value.dtype and mine[name].shape == value.shape, (i, name)
                assert np.array_equal(mine[name], value), f"frame {i} field {name}"
                assert mine[name].flags.writeable
            else:
                assert mine[name] == value
    reader = deepmd_reader(deepmd_db)
    if reader is None:
        pytest.skip("deepmd-kit's LmdbDataReader does not import here (dpdata's decoding compared above)")
    assert len(reader) == len(ds)
    assert np.array_equal(ds.sizes(), reader.frame_nlocs)
    for i in range(len(ds)):
        frame = reader[i]
        for name, theirs_name in DEEPMD_NAMES.items():
            assert np.array_equal(ds[i][name].reshape(-1), frame[theirs_name].reshape(-1)), (i, name)


def test_deepmd_metadata_and_sizes(deepmd_db):
    ds = lmdbloader.LmdbDataset(deepmd_db, samples="deepmd", index_dir="none")
    assert ds.layout_metadata["nframes"] == 18 and ds.layout_metadata["type_map"] == ["O", "H", "C"]
    sizes = ds.sizes()
    assert sizes.dtype == np.int64 and not sizes.flags.writeable
    assert sizes.tolist() == [3] * 5 + [7] * 4 + [1] * 6 + [7] * 3
    assert [len(ds[i]["atom_types"]) for i in range(len(ds))] == sizes.tolist()


def test_aselmdb_rows_equal_lmdbdatabase_in_id_order(ase_db):
    ds = lmdbloader.LmdbDataset(ase_db, samples="aselmdb", index_dir="none")
    db = ase_reader(ase_db)
    assert len(ds) == len(db) == 126
    assert ds.layout_metadata == db.metadata == {"source": "test", "units": "eV"}
    ours = ds.__getitems__(list(range(len(ds))))
    for i, mine in enumerate(ours):
        row = db._get_row_by_index(i)
        assert mine["id"] == row.id == db.ids[i]
        for name in ASE_ARRAYS:
            assert isinstance(mine[name], np.ndarray), name
            theirs = np.asarray(getattr(row, name))
            assert mine[name].dtype == theirs.dtype and np.array_equal(mine[name], theirs), (i, name)
        assert mine["energy"] == row.energy
        assert mine["key_value_pairs"] == row.key_value_pairs and mine["data"] == row.data
        assert mine["unique_id"] == row.unique_id
    # Keys sort "1", "10", "100", ...: the positions follow the ids, not the keys.
    keys = [ds.reader.key(p) for p in ds.positions()]
    assert keys == [str(i).encode() for i in db.ids]
    assert ds.sizes().tolist() == [len(db._get_row_by_index(i).numbers) for i in range(len(ds))]


def test_aselmdb_natoms_saved_beside_the_index_and_given(ase_db, tmp_path):
    ds = lmdbloader.LmdbDataset(ase_db, samples="aselmdb", index_dir=str(tmp_path))
    sizes = ds.sizes()
    saved = [name for name in os.listdir(tmp_path) if name.endswith(".natoms.npy")]
    assert len(saved) == 1
    assert np.array_equal(np.load(tmp_path / saved[0]), sizes)
    again = lmdbloader.LmdbDataset(ase_db, samples="aselmdb", index_dir=str(tmp_path)).sizes()
    assert isinstance(again, np.memmap) or isinstance(again.base, np.memmap)  # loaded, not read again
    assert np.array_equal(again, sizes)
    # fairchem keeps natoms in metadata.npz beside the file.
    np.savez(tmp_path / "metadata.npz", natoms=sizes)
    given = lmdbloader.LmdbDataset(ase_db, samples=lmdbloader.AseDbRows(natoms=tmp_path / "metadata.npz"))
    assert np.array_equal(given.sizes(), sizes)


def test_a_dataloader_with_workers_reads_every_row_once(ase_db, deepmd_db):
    for path, samples, field in ((ase_db, "aselmdb", "id"), (deepmd_db, "deepmd", "energies")):
        ds = lmdbloader.LmdbDataset(path, samples=samples, rss_budget="8MiB")
        loader = torch.utils.data.DataLoader(ds, batch_size=8, shuffle=True, num_workers=2,
                                             collate_fn=lambda batch: [s[field] for s in batch])
        seen = sorted(float(v) for batch in loader for v in batch)
        assert seen == sorted(float(ds[i][field]) for i in range(len(ds)))
        assert pickle.loads(pickle.dumps(ds))[3][field] == ds[3][field]


def test_decimal_ids_place_every_key_as_lmdb_sorts_it():
    rng = np.random.default_rng(5)
    for last in (1, 9, 10, 11, 99, 100, 101, 999, 1000, 12345):
        deleted = rng.choice(np.arange(1, last + 1), size=min(last - 1, 7), replace=False)
        ids = DecimalIds(last, np.r_[deleted, last + 3])  # an id past nextid counts for nothing
        live = [i for i in range(1, last + 1) if i not in set(deleted.tolist())]
        keys = sorted(b"%d" % i for i in live)
        got = ids.ids(np.arange(ids.count))
        assert got.tolist() == live
        assert [keys[p] for p in ids.places(got)] == [b"%d" % i for i in live], last


# Bad input ------------------------------------------------------------------


def _rewrite(src, dst, subdir, change):
    """A copy of the LMDB at src with change(txn) applied, written by py-lmdb
    (read through lmdbloader: py-lmdb 3 refuses a second open of a file the
    owners' readers of an earlier test may still hold)."""
    source = lmdbloader.Reader(str(src), index_dir="none")
    out = lmdb.open(str(dst), subdir=subdir, map_size=1 << 28)
    with out.begin(write=True) as w:
        for i in range(len(source)):
            w.put(source.key(i), source[i])
        change(w)
    out.close()
    return str(dst)


def _packed_metadata(**changes):
    import msgpack

    def change(txn):
        meta = msgpack.unpackb(txn.get(b"__metadata__"))
        meta.update(changes)
        txn.put(b"__metadata__", msgpack.packb(meta, use_bin_type=True))
    return change


def test_deepmd_nframes_beyond_the_frames_present_is_refused(deepmd_db, tmp_path):
    bad = _rewrite(deepmd_db, tmp_path / "more", True, _packed_metadata(nframes=19, frame_nlocs=[3] * 19,
                                                                             frame_system_ids=[0] * 19))
    with pytest.raises(lmdbloader.CorruptedError, match=r"more.*nframes=19.*000000000018"):
        lmdbloader.LmdbDataset(bad, samples="deepmd")


def test_deepmd_frame_nlocs_of_the_wrong_length_is_refused(deepmd_db, tmp_path):
    bad = _rewrite(deepmd_db, tmp_path / "short", True, _packed_metadata(frame_nlocs=[3] * 17))
    with pytest.raises(lmdbloader.CorruptedError, match=r"short.*frame_nlocs holds 17 values for nframes=18"):
        lmdbloader.LmdbDataset(bad, samples="deepmd")


def test_deepmd_without_metadata_or_with_a_bad_frame(deepmd_db, tmp_path):
    plain = _rewrite(deepmd_db, tmp_path / "plain", True, lambda txn: txn.delete(b"__metadata__"))
    with pytest.raises(ValueError, match="plain.*no __metadata__"):
        lmdbloader.LmdbDataset(plain, samples="deepmd")
    frame = _rewrite(deepmd_db, tmp_path / "frame", True, lambda txn: txn.put(b"000000000004", b"\xc1junk"))
    ds = lmdbloader.LmdbDataset(frame, samples="deepmd")
    with pytest.raises(lmdbloader.DecodeError, match=r"record 4 of .*frame.*frame 4.*not msgpack"):
        ds[4]
    assert ds[5]["coords"].shape == (7, 3)


def _ase_put(key, value):
    return lambda txn: txn.put(key, zlib.compress(value))


def test_aselmdb_deleted_ids_that_are_present_are_refused(ase_db, tmp_path):
    bad = _rewrite(ase_db, tmp_path / "deleted.aselmdb", False, _ase_put(b"deleted_ids", b"[3, 10, 57, 100, 42]"))
    with pytest.raises(lmdbloader.CorruptedError, match=r"deleted\.aselmdb.*deleted_ids holds 1 ids.*42"):
        lmdbloader.LmdbDataset(bad, samples="aselmdb")


@pytest.mark.parametrize("nextid, said", [(120, "a row with id 120 is present"), (140, "holds 126")])
def test_aselmdb_a_nextid_that_lies_is_refused(ase_db, tmp_path, nextid, said):
    bad = _rewrite(ase_db, tmp_path / "next.aselmdb", False, _ase_put(b"nextid", b"%d" % nextid))
    with pytest.raises(lmdbloader.CorruptedError, match=rf"next\.aselmdb: nextid={nextid}.*{said}"):
        lmdbloader.LmdbDataset(bad, samples="aselmdb")


def test_aselmdb_rows_not_zlib_or_not_json_name_the_record(ase_db, tmp_path):
    def change(txn):
        txn.put(b"5", b"not zlib at all")
        txn.put(b"6", zlib.compress(b'{"numbers": [1, 2'))
    bad = _rewrite(ase_db, tmp_path / "rows.aselmdb", False, change)
    ds = lmdbloader.LmdbDataset(bad, samples="aselmdb")
    with pytest.raises(lmdbloader.DecodeError, match=r"rows\.aselmdb \(row id 5\): not zlib"):
        ds[3]  # ids 1, 2, 4, 5: index 3 is id 5
    with pytest.raises(lmdbloader.DecodeError, match=r"rows\.aselmdb.*row id 6.*not JSON"):
        ds[4]
    with pytest.raises(lmdbloader.DecodeError, match=r"row id 5.*not zlib"):
        ds.sizes()
    bad_reserved = _rewrite(ase_db, tmp_path / "reserved.aselmdb", False,
                            lambda txn: txn.put(b"nextid", b"\x00garbage"))
    with pytest.raises(lmdbloader.CorruptedError, match=r"reserved\.aselmdb.*nextid record is not zlib"):
        lmdbloader.LmdbDataset(bad_reserved, samples="aselmdb")


def test_a_size_column_that_does_not_fit_is_refused(ase_db, tmp_path):
    np.save(tmp_path / "short.npy", np.ones(125, dtype=np.int64))
    ds = lmdbloader.LmdbDataset(ase_db, samples=lmdbloader.AseDbRows(natoms=tmp_path / "short.npy"))
    with pytest.raises(ValueError, match=r"short\.npy.*125 values, shorter than the dataset's 126"):
        ds.sizes()
    np.save(tmp_path / "floats.npy", np.ones(126))
    ds = lmdbloader.LmdbDataset(ase_db, samples=lmdbloader.AseDbRows(natoms=tmp_path / "floats.npy"))
    with pytest.raises(ValueError, match=r"floats\.npy.*one integer per record"):
        ds.sizes()
    with pytest.raises(ValueError, match="decodes its records itself"):
        lmdbloader.LmdbDataset(ase_db, samples="aselmdb", decode="raw")


def test_a_set_of_files_is_each_file_one_after_the_other(deepmd_db, ase_db, tmp_path):
    import shutil
    folder = tmp_path / "frames"
    folder.mkdir()
    for name in ("a.lmdb", "b.lmdb"):
        shutil.copytree(deepmd_db, folder / name)
    one = lmdbloader.LmdbDataset(deepmd_db, samples="deepmd", index_dir="none")
    both = lmdbloader.LmdbDataset(str(folder), samples="deepmd", index_dir="none")
    assert len(both) == 2 * len(one)
    assert both.sizes().tolist() == one.sizes().tolist() * 2
    for i in (0, 17, 18, 35):
        assert np.array_equal(both[i]["forces"], one[i % 18]["forces"])
    shutil.copy(ase_db, tmp_path / "copy.aselmdb")
    rows = lmdbloader.LmdbDataset([ase_db, str(tmp_path / "copy.aselmdb")], samples="aselmdb", index_dir="none")
    ids = [r["id"] for r in rows.__getitems__(list(range(len(rows))))]
    assert ids == ase_reader(ase_db).ids * 2


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_rows_frames_and_metadata_raise_only_named_errors(deepmd_db, ase_db, tmp_path, data):
    """Random damage to a frame, __metadata__ or a row (bytes, or the JSON
    inside the zlib) is refused with the documented exceptions, never
    another one and never a crash."""
    kind = data.draw(st.sampled_from(["frame", "metadata", "row bytes", "row text"]))
    src, subdir, key = (deepmd_db, True, b"000000000004") if kind == "frame" else \
        (deepmd_db, True, b"__metadata__") if kind == "metadata" else (ase_db, False, b"5")
    value = lmdbloader.Reader(src, index_dir="none").get(key)
    if kind == "row text":
        value = zlib.decompress(value)
    damaged = bytearray(value)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(damaged) - 1))
        damaged[at:at + data.draw(st.integers(0, 3))] = data.draw(st.binary(max_size=3))
    damaged = zlib.compress(bytes(damaged)) if kind == "row text" else bytes(damaged)
    target = os.path.join(tempfile.mkdtemp(dir=tmp_path), "damaged")  # one per example
    bad = _rewrite(src, target, subdir, lambda txn: txn.put(key, damaged))
    try:
        ds = lmdbloader.LmdbDataset(bad, samples="aselmdb" if kind.startswith("row") else "deepmd",
                                    index_dir="none")
        ds.__getitems__(list(range(len(ds))))
        ds.sizes()
    except (lmdbloader.CorruptedError, lmdbloader.DecodeError, KeyError, ValueError) as e:
        assert str(bad) in str(e) or "sizes" in str(e), f"{type(e).__name__} does not name the file: {e}"


def test_an_ndarray_that_is_not_one_is_a_decode_error(ase_db, tmp_path):
    rows = (b'{"numbers": {"__ndarray__": [[1000000000000], "float64", []]}}',  # never allocated
            b'{"numbers": {"__ndarray__": [[3], "int64", [1, 2]]}}',
            b'{"numbers": {"__ndarray__": [[1], "object", [null]]}}',
            b'{"numbers": {"__ndarray__": 5}}')
    for k, text in enumerate(rows):
        bad = _rewrite(ase_db, tmp_path / f"nd{k}.aselmdb", False, _ase_put(b"5", text))
        with pytest.raises(lmdbloader.DecodeError, match=rf"nd{k}\.aselmdb \(row id 5\): not a row as ase"):
            lmdbloader.LmdbDataset(bad, samples="aselmdb", index_dir="none")[3]


def test_pickles_carry_no_column_a_record(ase_db, tmp_path):
    frames = write_deepmd(tmp_path / "many.lmdb", [(5000, 1)])
    ds = lmdbloader.LmdbDataset(frames, samples="deepmd", index_dir="none")
    assert len(ds.sizes()) == 5000
    copy = pickle.loads(pickle.dumps(ds))
    assert len(pickle.dumps(ds)) < 5000  # not 8 bytes a frame, twice
    assert np.array_equal(copy.sizes(), ds.sizes()) and np.array_equal(copy[4999]["coords"], ds[4999]["coords"])
    # What spawn and forkserver workers get: a few numbers a file, frames read the same.
    rows = lmdbloader.LmdbDataset(ase_db, samples="aselmdb", index_dir="none")
    assert len(pickle.dumps(rows)) < 5000
    assert pickle.loads(pickle.dumps(rows))[125]["id"] == rows[125]["id"] == 130


def test_a_frame_missing_in_the_middle_is_a_key_error_and_the_rest_reads(deepmd_db, tmp_path):
    hole = _rewrite(deepmd_db, tmp_path / "hole", True, lambda txn: txn.delete(b"000000000007"))
    ds = lmdbloader.LmdbDataset(hole, samples="deepmd", index_dir="none")
    whole = lmdbloader.LmdbDataset(deepmd_db, samples="deepmd", index_dir="none")
    with pytest.raises(KeyError, match=r"hole: no key b'000000000007', the frame of sample 7"):
        ds[7]
    for i in (6, 8, 17):  # past the hole each frame's place is looked up, and found
        assert np.array_equal(ds[i]["forces"], whole[i]["forces"])


def test_deepmd_without_frame_nlocs_reads_the_atoms_once_and_saves_them(deepmd_db, tmp_path):
    import msgpack

    def drop(txn):
        meta = msgpack.unpackb(txn.get(b"__metadata__"))
        del meta["frame_nlocs"], meta["frame_system_ids"]
        txn.put(b"__metadata__", msgpack.packb(meta, use_bin_type=True))
    bare = _rewrite(deepmd_db, tmp_path / "bare", True, drop)
    index = tmp_path / "index"
    ds = lmdbloader.LmdbDataset(bare, samples="deepmd", index_dir=str(index))
    expected = lmdbloader.LmdbDataset(deepmd_db, samples="deepmd", index_dir="none").sizes()
    assert np.array_equal(ds.sizes(), expected)
    saved = [name for name in os.listdir(index) if name.endswith(".nlocs.npy")]
    assert len(saved) == 1 and np.array_equal(np.load(index / saved[0]), expected)
