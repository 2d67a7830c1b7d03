"""The budget at scale: a database of 5,000,000 records written by py-lmdb
is read by a Reader and two persistent DataLoader workers, each under a 32 MiB
budget as the kernel counts it (/proc/<pid>/statm), over two shuffled epochs
of a sample of it, while the same job over py-lmdb grows by the pages of the
file its workers map; every record read equals what py-lmdb reads for its key.

The record index of such a database (29 bytes a record for b"%09d" keys:
145 MB) cannot be held under the budget: index_mode="auto" reads it from its saved
file through a page cache of at most an eighth of the budget, and holds beside
it the table of the database's leaf pages (8 bytes a leaf of about 48 records:
0.8 MB) that the records are read out of."""

import functools
import os
import pathlib
import shutil

import numpy as np
import pytest

lmdb = pytest.importorskip("lmdb")

import lmdbloader  # noqa: E402

from conftest import MiB, statm_rss  # noqa: E402
from pylmdb_baseline import PyLmdbKeyedDataset  # noqa: E402

RECORDS = 5_000_000
LEAF_TABLE = RECORDS // 48 * 8 + 4096  # bytes: 8 a leaf page, 48 records a leaf
KEY_BYTES = 9  # b"%09d"
VALUE_BYTES = 64  # the key, then 55 bytes derived from it: a 429 MB file
SAMPLE = 200_000  # positions the epochs shuffle: 4% of the records, on 85% of the leaf pages
BATCH = 256
BUDGET = 32 * MiB
# What a process's RSS may grow by beside the budget: Python's and torch's
# (the loader's objects, batches of 16 KiB in flight, library pages first
# touched: 2 MiB of libtorch in the main process at its first batch). Seen
# here: workers 4.8 MiB (the index cache, 4 MiB, most of it); the main
# process 9.6-12 MiB, of which 1.7-6.7 MiB are the index build's buffers,
# freed but kept in the heap by glibc (malloc_trim returns them).
ALLOWANCE = 8 * MiB


def keys_of(positions):
    """b"%09d" % p for each position, as the rows of an (n, 9) uint8 array."""
    positions = np.asarray(positions, dtype=np.int64)
    digits = positions[:, None] // 10 ** np.arange(KEY_BYTES - 1, -1, -1, dtype=np.int64) % 10
    return (digits + ord("0")).astype(np.uint8)


def values_of(positions):
    """Each record's value as the rows of an (n, 64) uint8 array: its key,
    then bytes of splitmix64 of its position (every value differs)."""
    x = np.asarray(positions, dtype=np.uint64)[:, None] * np.uint64(8) + np.arange(7, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return np.concatenate([keys_of(positions), x.view(np.uint8)[:, :VALUE_BYTES - KEY_BYTES]], axis=1)


def expected(positions):
    return [row.tobytes() for row in values_of(positions)]


def write_numbered_db(path, chunk=1_000_000):
    """RECORDS records written by py-lmdb as a dataset script would, fast:
    keys in order, appended a million a write transaction (4-5 s here)."""
    with lmdb.open(path, map_size=1 << 30, sync=False, metasync=False) as env:
        for lo in range(0, RECORDS, chunk):
            positions = np.arange(lo, min(RECORDS, lo + chunk))
            keys, values = keys_of(positions).tobytes(), values_of(positions).tobytes()
            pairs = ((keys[KEY_BYTES * j:KEY_BYTES * (j + 1)], values[VALUE_BYTES * j:VALUE_BYTES * (j + 1)])
                     for j in range(len(positions)))
            with env.begin(write=True) as txn:
                assert txn.cursor().putmulti(pairs, append=True) == (len(positions), len(positions))


@pytest.fixture(scope="module")
def numbered_db(tmp_path_factory):
    """(path, index_dir) of the database write_numbered_db writes; its record
    index (165 MB) is saved beside it, not in the cache directory, and both
    go when the module ends."""
    folder = tmp_path_factory.mktemp("large")
    path = str(folder / "db")
    write_numbered_db(path)
    (folder / "index").mkdir()
    yield path, str(folder / "index")
    shutil.rmtree(folder)


class RecordedShuffle:
    """A fresh shuffle of ``positions`` each epoch, kept as ``order`` so that
    the main process knows which records each batch holds (batches arrive in
    the sampler's order)."""

    def __init__(self, positions, seed):
        self.positions = positions
        self.rng = np.random.default_rng(seed)
        self.order = None

    def __len__(self):
        return len(self.positions)

    def __iter__(self):
        self.order = self.rng.permutation(self.positions)
        return map(int, self.order)


def _record_start_rss(folder, worker_id):
    with open(os.path.join(folder, str(os.getpid())), "w") as f:
        f.write(str(statm_rss()))


def _as_is(batch):
    return batch


def run_job(dataset, positions, folder, check_in_main=None, epochs=2):
    """Two persistent workers read ``epochs`` shuffles of ``positions`` in
    batches of BATCH, each batch compared with the values the keys were
    written with (``check_in_main(positions, batch)``, if given, on every
    4th batch too). Returns (records that differ, records read, per-worker
    RSS {pid: (at start, after the first batch, peak)}, main's peak RSS)."""
    from torch.utils.data import DataLoader
    os.makedirs(folder)
    sampler = RecordedShuffle(positions, seed=2)
    loader = DataLoader(dataset, batch_size=BATCH, sampler=sampler, num_workers=2, persistent_workers=True,
                        collate_fn=_as_is, worker_init_fn=functools.partial(_record_start_rss, folder))
    bad = seen = 0
    first, peak, main_peak = {}, {}, 0
    for _ in range(epochs):
        for n, batch in enumerate(loader):
            wanted = sampler.order[n * BATCH:(n + 1) * BATCH]
            bad += sum(a != b for a, b in zip(batch, expected(wanted))) + abs(len(batch) - len(wanted))
            seen += len(batch)
            if check_in_main is not None and n % 4 == 0:
                check_in_main(wanted, batch)
            if n % 8 == 0 or not first:  # every worker's RSS as the kernel counts it
                for w in loader._iterator._workers:
                    rss = statm_rss(w.pid)
                    first.setdefault(w.pid, rss)
                    peak[w.pid] = max(peak.get(w.pid, 0), rss)
                main_peak = max(main_peak, statm_rss())
        for w in loader._iterator._workers:  # the end of the epoch
            peak[w.pid] = max(peak[w.pid], statm_rss(w.pid))
        main_peak = max(main_peak, statm_rss())
    starts = {int(pid): int(pathlib.Path(folder, pid).read_text()) for pid in os.listdir(folder)}
    workers = {pid: (start, first[pid], peak[pid]) for pid, start in starts.items()}
    del loader
    return bad, seen, workers, main_peak


def growth_mib(workers):
    """{pid: (MiB grown from the worker's start, MiB grown from after the first batch)}."""
    return {pid: (round((p - s) / MiB, 1), round((p - f) / MiB, 1)) for pid, (s, f, p) in workers.items()}


def test_workers_and_reader_stay_under_budget_on_5m_records_while_pylmdb_grows(numbered_db, tmp_path):
    pytest.importorskip("torch")
    path, index_dir = numbered_db
    positions = np.random.default_rng(1).choice(RECORDS, SAMPLE, replace=False)
    before = statm_rss()
    # The record index is built (or loaded) here, paged from its file.
    ds = lmdbloader.LmdbDataset(path, decode="raw", rss_budget=BUDGET, index_dir=index_dir)
    assert len(ds) == RECORDS

    def same_in_main(wanted, batch):  # the main process's Reader reads them too
        assert ds.reader.get_batch(wanted.tolist()) == batch

    bad, seen, workers, main_peak = run_job(ds, positions, str(tmp_path / "ours"), same_in_main)
    assert (bad, seen) == (0, 2 * SAMPLE), f"{bad} of {seen} records differ from what was written"
    stats = ds.reader.stats()
    assert stats["index_residence"] == "leaves", stats
    assert stats["index_cache_held"] <= stats["index_bytes"] <= BUDGET // 8 + LEAF_TABLE, stats
    assert stats["leaf_values_read"] > 0, stats
    assert len(workers) == 2
    ours = growth_mib(workers)
    for pid, (s, f, p) in workers.items():
        assert p - s <= BUDGET + ALLOWANCE, \
            f"worker {pid} grew {ours[pid]} MiB (from its start, from its first batch); " \
            f"budget {BUDGET // MiB} + {ALLOWANCE // MiB} MiB"
    # Workers inherit what this process holds, counted in their RSS from the
    # fork on, so their growth cannot show it (an index held resident here,
    # 143 MiB with no budget, grew them by 2 MiB): this process's growth
    # since before the open bounds it.
    main = round((main_peak - before) / MiB, 1)
    assert main_peak - before <= BUDGET + ALLOWANCE, \
        f"the main process grew {main} MiB from before the open; " \
        f"budget {BUDGET // MiB} + {ALLOWANCE // MiB} MiB"

    # The oracle: what py-lmdb reads for the same keys (the job below
    # compares all of its own reads with the written values, as above).
    spot = np.random.default_rng(3).choice(RECORDS, 1000, replace=False).tolist()
    with lmdb.open(path, readonly=True, lock=False) as env, env.begin() as txn:
        assert [txn.get(b"%09d" % p) for p in spot] == ds.reader.get_batch(spot)
        assert [b"%09d" % p for p in spot] == [ds.reader.key(p) for p in spot]

    # The same job over py-lmdb: each worker maps the leaf pages it touches,
    # and fault-around maps their neighbours in the page cache (here the
    # whole file within the first epoch).
    base_bad, base_seen, base_workers, _ = run_job(PyLmdbKeyedDataset(path, RECORDS), positions,
                                                   str(tmp_path / "pylmdb"))
    assert (base_bad, base_seen) == (0, 2 * SAMPLE)
    theirs = growth_mib(base_workers)
    print(f"\nlmdbloader workers grew {ours} MiB, main {main} MiB; py-lmdb workers {theirs} MiB "
          f"(from the start, from the first batch); main's index cache {stats['index_cache_held'] / MiB:.1f} "
          f"MiB, cache={stats['cache_policy']}")
    for pid, (s, f, p) in base_workers.items():
        assert p - f > 4 * (BUDGET + ALLOWANCE), f"py-lmdb worker {pid} grew only {theirs[pid]} MiB"


def test_reader_under_16mib_reads_random_batches_of_5m_records(numbered_db):
    path, index_dir = numbered_db
    rng = np.random.default_rng(4)
    batches = [rng.integers(0, RECORDS, BATCH) for _ in range(2000)]
    values_of(batches[0])  # numpy's code paths touched before the baseline
    before = statm_rss()
    reader = lmdbloader.Reader(path, rss_budget="16MiB", index_dir=index_dir)
    bad = peak = 0
    for n, positions in enumerate(batches):
        bad += reader.get_batch(positions.tolist()) != expected(positions)
        if n % 100 == 0 or n == len(batches) - 1:
            peak = max(peak, statm_rss())
    assert bad == 0, f"{bad} of {len(batches)} batches differ from what was written"
    stats = reader.stats()
    assert stats["index_residence"] == "leaves", stats
    assert stats["index_cache_held"] <= stats["index_bytes"] <= 2 * MiB + LEAF_TABLE, stats
    assert stats["leaf_node_reads"] == stats["leaf_values_read"] == len(batches) * BATCH, stats
    grown = (peak - before) / MiB
    print(f"\nReader under 16 MiB: grew {grown:.1f} MiB over {len(batches) * BATCH} reads; "
          f"{ {k: v for k, v in stats.items() if k.startswith('index')} }")
    assert peak - before <= 16 * MiB + ALLOWANCE, f"grew {grown:.1f} MiB; budget 16 + {ALLOWANCE // MiB} MiB"
