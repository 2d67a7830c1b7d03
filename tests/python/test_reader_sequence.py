"""A Reader and its keys() are sequences as Python's list is: every slice
(steps, negative bounds, past the end) gives what the same slice of the
records as py-lmdb reads them gives."""

import lmdb
import pytest

import lmdbloader


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("seq") / "db")
    with lmdb.open(path, map_size=1 << 22) as env, env.begin(write=True) as txn:
        for i in range(23):
            txn.put(b"key%03d" % i, b"v" * (i * 97 % 5000))
    with lmdb.open(path, readonly=True, lock=False) as env, env.begin() as txn:
        items = list(txn.cursor())
    return path, [k for k, _ in items], [v for _, v in items]


SLICES = [slice(None), slice(3), slice(-3, None), slice(2, 19, 4), slice(None, None, -1), slice(20, 2, -3),
          slice(-100, 100), slice(30, 40), slice(5, 5), slice(None, None, 7)]


@pytest.mark.parametrize("mode", ["pread", "mmap"])
def test_slices_of_a_reader_and_its_keys_are_the_records_py_lmdb_reads(database, mode):
    path, keys, values = database
    r = lmdbloader.Reader(path, mode=mode)
    for s in SLICES:
        assert r[s] == values[s], s
        assert r.keys()[s] == keys[s], s
    assert r[-1] == values[-1] and r.keys()[-2] == keys[-2]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        r[::0]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        r.keys()[::0]
    with pytest.raises(IndexError, match="index 23 out of range"):
        r.keys()[23]
    with pytest.raises(TypeError, match="indices must be integers"):
        r["key001"]
