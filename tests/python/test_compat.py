"""lmdbloader.compat runs py-lmdb style code unchanged and returns exactly
what py-lmdb returns."""

import os
import pickle

import pytest

lmdb = pytest.importorskip("lmdb")
import lmdbloader  # noqa: E402
import lmdbloader.compat as compat  # noqa: E402


@pytest.fixture
def foreign(tmp_path):
    path = str(tmp_path / "db")
    env = lmdb.open(path, map_size=1 << 28, max_dbs=2)
    records = {f"video_{i:04d}".encode(): bytes([i % 251]) * (i * 37 % 5000) for i in range(500)}
    with env.begin(write=True) as txn:
        for k, v in records.items():
            txn.put(k, v)
        named = env.open_db(b"extra", txn=txn)
        txn.put(b"a", b"1", db=named)
    env.close()
    return path, records


class VideoDataset:
    """The common pattern: open in each worker, txn.get by key."""

    def __init__(self, path, keys, lmdb_module):
        self.path, self.keys, self.lmdb, self.env = path, keys, lmdb_module, None

    def __getitem__(self, i):
        if self.env is None:
            self.env = self.lmdb.open(self.path, readonly=True, lock=False, readahead=False, meminit=False)
        with self.env.begin(write=False) as txn:
            return txn.get(self.keys[i])


def test_same_dataset_code_returns_the_same_bytes(foreign):
    path, records = foreign
    keys = sorted(records)
    ours, theirs = VideoDataset(path, keys, compat), VideoDataset(path, keys, lmdb)
    for i in range(len(keys)):
        assert ours[i] == theirs[i] == records[keys[i]]


def test_cursors_match_pylmdb(foreign):
    path, _ = foreign
    a = compat.open(path, readonly=True, lock=False)
    b = lmdb.open(path, readonly=True, lock=False)
    with a.begin() as ta, b.begin() as tb:
        assert list(ta.cursor()) == list(tb.cursor())
        assert list(ta.cursor().iterprev(values=False)) == list(tb.cursor().iterprev(values=False))
        ca, cb = ta.cursor(), tb.cursor()
        for probe in [b"video_0100", b"video_01005", b"zzz", b"", b"video_0499"]:
            assert ca.set_range(probe) == cb.set_range(probe)
            assert ca.item() == cb.item()
            if probe:  # py-lmdb rejects an empty key in set_key
                assert ca.set_key(probe) == cb.set_key(probe)
                assert ca.key() == cb.key() and ca.value() == cb.value()
        assert ca.first() and cb.first() and ca.prev() == cb.prev()
        assert ca.item() == cb.item()
        assert ca.last() and cb.last() and ca.next() == cb.next()
        assert ta.get(b"missing", b"dflt") == tb.get(b"missing", b"dflt") == b"dflt"
        assert ca.get(b"video_0007") == cb.get(b"video_0007")
    assert a.stat()["entries"] == b.stat()["entries"]
    assert a.info()["last_txnid"] == b.info()["last_txnid"]


def test_named_database(foreign):
    path, _ = foreign
    env = compat.open(path, readonly=True, lock=False, max_dbs=2)
    db = env.open_db(b"extra")
    with env.begin(db=db) as txn:
        assert txn.get(b"a") == b"1"
    with pytest.raises(compat.NotFoundError, match="MDB_NOTFOUND"):
        env.open_db(b"absent", create=False)
    with pytest.raises(compat.ReadonlyError, match="mdb_dbi_open: Permission denied"):
        env.open_db(b"absent")  # create=True on a read-only environment, as py-lmdb


def test_budget_from_keyword_and_environment(foreign, monkeypatch):
    path, _ = foreign
    env = compat.open(path, lock=False, rss_budget="32MiB")
    assert env._main.reader.stats()["rss_budget"] == 32 << 20
    monkeypatch.setenv("LMDBLOADER_RSS_BUDGET", "48MiB")
    env = compat.open(path, lock=False)
    assert env._main.reader.stats()["rss_budget"] == 48 << 20


def test_unsupported_calls_raise_clear_errors(foreign):
    path, _ = foreign
    env = compat.open(path, lock=False)
    with pytest.raises(lmdbloader.ReadonlyError, match="read-only environment"):
        env.begin(write=True)
    txn = env.begin()
    for call in (lambda: txn.put(b"k", b"v"), lambda: txn.delete(b"k"), lambda: txn.cursor().put(b"k", b"v"),
                 lambda: env.copy("/tmp/x"), lambda: txn.drop(None)):
        with pytest.raises(lmdbloader.ReadonlyError):
            call()
    with pytest.raises(TypeError):
        compat.open(path, no_such_option=True)
    with pytest.raises(TypeError, match="pickled"):
        pickle.dumps(env)
    # As in LMDB, the flags of an existing database win over those asked for.
    assert compat.open(path, lock=False, max_dbs=2).open_db(b"extra", dupsort=True).flags()["dupsort"] is False


def test_read_only_opens_write_nothing_into_the_dataset_directory(foreign, tmp_path, monkeypatch):
    path, records = foreign
    monkeypatch.setenv("LMDBLOADER_INDEX_DIR", str(tmp_path / "cache"))
    before = sorted(os.listdir(path))
    env = compat.open(path, readonly=True, lock=False)
    with env.begin() as txn:
        assert [txn.get(k) for k in records] == list(records.values())
    env.close()
    # The index compat built went to the cache directory, where the next open finds it.
    assert lmdbloader.Reader(path).stats()["index_source"].startswith("loaded from " + str(tmp_path / "cache"))
    assert sorted(os.listdir(path)) == before
    # Asking for it puts it there.
    lmdbloader.Reader(path, index_dir=path)
    assert len(os.listdir(path)) == len(before) + 1
