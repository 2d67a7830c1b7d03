"""Reads out of LMDB leaf pages (index_mode="leaves", and what "auto" picks
under a budget the held index does not fit) against py-lmdb's txn.get.

py-lmdb writes each database in LMDB 0.9's format and in 1.0's
(lib_version=1), in four shapes that take the reader's ways: records of one
size appended (every leaf regular: each record's node read alone), 2 KiB
records appended (each value's overflow page read with its header), records
of many sizes inserted out of order (leaves read whole), and values of many
sizes with some on overflow pages (those leaves left to the index).
Random batches of every size up to past the 512 records whose leaves a batch
keeps, single reads and reads in a forked child must equal py-lmdb's.
Damaged leaves give CorruptedError naming the file, never bytes.
"""

import os
import random

import pytest

lmdb = pytest.importorskip("lmdb")
import lmdbloader  # noqa: E402

RECORDS = 12000  # its held index (29 bytes a record) outgrows a quarter of 1 MiB


def _write(path, shape, lib_version):
    rng = random.Random(7)
    if shape == "one size appended":
        items = [(b"%09d" % i, rng.randbytes(64)) for i in range(RECORDS)]
    elif shape == "2 KiB appended":  # each value on an overflow page of its own
        items = [(b"%09d" % i, rng.randbytes(2048)) for i in range(RECORDS)]
    elif shape == "many sizes out of order":
        items = [(b"%09d" % i, rng.randbytes(rng.randint(0, 300))) for i in range(RECORDS)]
        rng.shuffle(items)
    else:  # some values on overflow pages
        items = [(b"k%d" % i, rng.randbytes(5000 if i % 41 == 0 else rng.randint(1, 120))) for i in range(RECORDS)]
    env = lmdb.open(path, map_size=1 << 28, lib_version=lib_version)
    with env.begin(write=True) as txn:
        txn.cursor().putmulti(items, append=shape.endswith("appended"))
    env.close()


def _expected(path):
    env = lmdb.open(path, readonly=True, lock=False)
    with env.begin() as txn:
        values = [v for _, v in txn.cursor()]
    env.close()
    return values


def _batches(n, seed):
    rng = random.Random(seed)
    for size in (1, 2, 7, 64, 256, 511, 512, 600):
        yield [rng.randrange(n) for _ in range(size)]


@pytest.mark.parametrize("lib_version", [0, 1])
@pytest.mark.parametrize("shape", ["one size appended", "2 KiB appended", "many sizes out of order",
                                   "some on overflow pages"])
def test_leaf_reads_equal_pylmdb(tmp_path, shape, lib_version):
    db = str(tmp_path / "db")
    _write(db, shape, lib_version)
    want = _expected(db)
    for mode, budget in (("leaves", None), ("auto", "1MiB")):
        r = lmdbloader.Reader(db, index_mode=mode, rss_budget=budget, index_dir=str(tmp_path / "idx"))
        st = r.stats()
        assert st["index_residence"] == "leaves", (mode, st["index_residence"])
        for seed in range(4):
            for batch in _batches(len(want), seed):
                assert r.get_batch(batch) == [want[i] for i in batch], (mode, len(batch))
        for i in random.Random(1).sample(range(len(want)), 50):
            assert r[i] == want[i]
        st = r.stats()
        assert st["leaf_values_read"] > 0
        if shape.endswith("appended"):
            assert st["leaf_page_reads"] == 0 and st["leaf_node_reads"] == st["leaf_values_read"]
        else:
            assert st["leaf_page_reads"] > 0 and st["leaf_node_reads"] == 0
        if shape == "some on overflow pages":
            assert st["index_entry_reads"] + st["index_page_reads"] > 0  # their leaves through the index
    pid = os.fork()
    if pid == 0:  # a worker forked from the reader's process
        ok = all(r.get_batch(b) == [want[i] for i in b] for b in _batches(len(want), 9))
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.parametrize("lock", [True, False])
@pytest.mark.parametrize("shape", ["one size appended", "2 KiB appended", "many sizes out of order"])
def test_damaged_leaves_are_corruption_never_bytes(tmp_path, shape, lock):
    """lock=True skips the file's change checks (LMDB's lock keeps the
    snapshot), so the leaf's own checks are what refuse it; without the lock
    the change of the file is seen first. Either way: CorruptedError."""
    db = str(tmp_path / "db")
    _write(db, shape, 0)
    r = lmdbloader.Reader(db, index_mode="leaves", lock=lock, index_dir=str(tmp_path / "idx"))
    assert r.stats()["index_residence"] == "leaves"
    r.get_batch([0, 1, 2])
    data = os.path.join(db, "data.mdb")
    with open(data, "r+b") as f:
        size = os.path.getsize(data)
        for page in range(2, size // 4096):  # all but the meta pages
            f.seek(page * 4096)
            f.write(b"\xa5" * 4096)
    for batch in ([0, 1, 2], [RECORDS - 1], list(range(100, 356))):
        with pytest.raises(lmdbloader.CorruptedError, match="data.mdb"):
            r.get_batch(batch)
    with pytest.raises(lmdbloader.CorruptedError, match="data.mdb"):
        r[5]
