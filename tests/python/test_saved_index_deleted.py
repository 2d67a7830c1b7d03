"""A saved index deleted under a running job (a scratch cleaner emptying
$TMPDIR or the index folder mid-run): a paged reader, its forked children
and the workers of every DataLoader start method read on, every record equal
to py-lmdb's. A forked child reads through the descriptor it inherited (the
folder stays empty); a process that starts afresh (spawn, forkserver) finds
no index and walks the data again, saving a new one."""

import os
import shutil

import pytest
import torch

import lmdbloader

lmdb = pytest.importorskip("lmdb")

RECORDS = 60000


def value_of(i):
    return b"record %d " % i + bytes([i % 251]) * (i % 37)


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("deleted-index") / "db")
    env = lmdb.open(path, map_size=64 << 20)
    with env.begin(write=True) as txn:
        for i in range(RECORDS):
            txn.put(b"%09d" % i, value_of(i))
    env.close()
    # The oracle: what py-lmdb reads, in key order.
    env = lmdb.open(path, readonly=True, lock=False)
    with env.begin() as txn:
        records = [bytes(v) for _, v in txn.cursor()]
    env.close()
    assert len(records) == RECORDS
    return path, records


def open_paged(path, index_dir, monkeypatch):
    """A dataset whose index is read paged from LMDBLOADER_INDEX_DIR (its
    resident form, 29 bytes a record, is past a quarter of the budget),
    then that folder deleted."""
    monkeypatch.setenv("LMDBLOADER_INDEX_DIR", index_dir)
    # Named as an option too: a forkserver started by an earlier test keeps
    # the environment it started with, and its workers with it.
    # index_mode="paged": every record through the deleted file (under "auto"
    # a table of leaf pages would serve these small records from the data).
    ds = lmdbloader.LmdbDataset(path, decode="raw", rss_budget="4MiB", index_dir=index_dir, index_mode="paged")
    stats = ds.reader.stats()
    assert stats["index_residence"] == "paged", stats
    assert ds[0] == value_of(0) and ds[RECORDS - 1] == value_of(RECORDS - 1)
    assert os.listdir(index_dir), "the index was not saved where expected"
    shutil.rmtree(index_dir)
    return ds


def test_the_parent_and_a_forked_child_read_on(database, tmp_path, monkeypatch):
    path, records = database
    index_dir = str(tmp_path / "idx")
    ds = open_paged(path, index_dir, monkeypatch)
    # Opened again: walks the data, saves anew.
    reader = lmdbloader.Reader(path, rss_budget="4MiB", index_mode="paged")
    assert reader.stats()["index_residence"] == "paged" and os.listdir(index_dir)
    shutil.rmtree(index_dir)
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            ok = ds.__getitems__(list(range(RECORDS))) == records and reader.get_batch(range(RECORDS)) == records
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert not os.path.exists(index_dir)  # read through the inherited descriptors: nothing rebuilt
    assert ds.__getitems__(list(range(RECORDS))) == records
    assert reader.get_batch(range(RECORDS)) == records


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_dataloader_workers_of_every_start_method_read_on(database, tmp_path, monkeypatch, method):
    path, records = database
    index_dir = str(tmp_path / "idx")
    ds = open_paged(path, index_dir, monkeypatch)
    # default_collate leaves a batch of bytes a list of them.
    loader = torch.utils.data.DataLoader(ds, batch_size=1000, num_workers=2, multiprocessing_context=method)
    got = [v for batch in loader for v in batch]
    assert len(got) == RECORDS
    bad = [i for i, (a, b) in enumerate(zip(got, records)) if a != b]
    assert not bad, f"{len(bad)} records differ from py-lmdb's, the first {bad[0]}"
    # Forked workers read through the descriptor they inherited; fresh ones
    # walked the data and saved the index again.
    assert os.path.exists(index_dir) == (method != "fork"), method
    assert ds.__getitems__(list(range(0, RECORDS, 7))) == records[::7]
