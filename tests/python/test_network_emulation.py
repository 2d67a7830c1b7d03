"""bench/netfs.c, the network file system bench/network_bench.py reads
through: lmdbloader reads every record through it as py-lmdb reads them, and
the emulation does what it says (a round trip per read request, at most N in
flight, a link's bandwidth, counters that count, an unmount on every way
out).

The timing checks are lower bounds the emulator guarantees by sleeping, so a
slow or loaded machine cannot fail them; how fast anything reads belongs to
the bench."""

import os
import pickle
import random
import signal
import sys
import threading
import time

import lmdb
import pytest

import lmdbloader

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import netfs  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
LATENCY_MS = 20
IN_FLIGHT = 4

_reason = netfs.unavailable()
pytestmark = pytest.mark.skipif(_reason is not None, reason=f"cannot emulate a network file system: {_reason}")


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    return netfs.build(str(tmp_path_factory.mktemp("netfs-bin")))


def value(i):
    """Sizes from 10 bytes (inline) to 40 KiB (overflow pages)."""
    size = 10 + (i * 7919) % (40 << 10)
    return (i.to_bytes(4, "little") * (size // 4 + 1))[:size]


@pytest.fixture(scope="module")
def backing(tmp_path_factory):
    """A py-lmdb database of 300 records and a 4 MiB plain file."""
    root = tmp_path_factory.mktemp("netfs-backing")
    with lmdb.open(str(root / "db"), map_size=64 << 20) as env, env.begin(write=True) as txn:
        for i in range(300):
            txn.put(b"k%05d" % i, value(i))
    with open(root / "blob", "wb") as f:
        f.write(os.urandom(4 << 20))
    # 150 leaf pages under one branch page, between the values' overflow pages.
    with lmdb.open(str(root / "wide"), map_size=256 << 20) as env, env.begin(write=True) as txn:
        for i in range(15000):
            txn.put(b"w%07d" % i, b"v" * (3000 if i % 100 == 0 else 8))
    return str(root)


def mount(backing, binary, **kw):
    try:
        return netfs.Mount(backing, binary=binary, **kw)
    except RuntimeError as e:
        refusals = ("mount failed", "failed to open /dev/fuse", "Operation not permitted", "Permission denied")
        if any(r in str(e) for r in refusals):
            pytest.skip(f"this sandbox refuses FUSE mounts: {e}")
        raise


@pytest.fixture(scope="module")
def fs(backing, binary):
    m = mount(backing, binary, latency_ms=LATENCY_MS, in_flight=IN_FLIGHT)
    yield m
    m.close()


def cold(fs, backing, name):
    """Evicted through the mount and in the backing directory."""
    assert netfs.evict([fs.path(name)]) == 0, f"{name} still cached through the mount after DONTNEED"
    assert netfs.evict([os.path.join(backing, name)]) == 0, f"{name} still cached in the backing dir"


def test_lmdbloader_reads_every_record_through_the_mount_as_pylmdb_does(fs, backing, tmp_path):
    with lmdb.open(os.path.join(backing, "db"), readonly=True, lock=False) as env, env.begin() as txn:
        oracle = [v for _, v in txn.cursor()]
    cold(fs, backing, "db/data.mdb")
    r = lmdbloader.Reader(fs.path("db"), index_dir=str(tmp_path))
    assert len(r) == len(oracle)
    got = r.get_batch(list(range(len(r))))
    mismatched = [i for i, (a, b) in enumerate(zip(got, oracle)) if a != b]
    assert not mismatched, f"records {mismatched[:5]} differ from py-lmdb's"
    assert r.get(b"k00123") == oracle[123]
    # Over a FUSE (or network) file system auto reads exactly the records, with threads.
    stats = r.stats()
    assert (stats["file_system"], stats["cache_policy"], stats["io_engine"]) == ("fuse", "exact", "threads"), stats


def test_first_open_reads_a_branch_pages_children_together(fs, backing, tmp_path):
    """The index walk keeps every request slot busy (the leaves under a branch
    page read at once), not one round trip per page; and finds every record."""
    cold(fs, backing, "wide/data.mdb")
    before = fs.stats()
    r = lmdbloader.Reader(fs.path("wide"), index_dir=str(tmp_path))
    moved = fs.delta(before, fs.stats())
    assert len(r) == 15000
    assert r.get(b"w0001234") == b"v" * 8 and r.get(b"w0001200") == b"v" * 3000
    assert moved["peak_in_flight"] == IN_FLIGHT, f"the walk kept at most {moved['peak_in_flight']} requests in flight"
    # A queue, not a speed: requests given together wait for a slot while
    # the others sleep their round trip, so the walk's reads waited on
    # average at least one round trip each for a slot (a branch's children
    # at once: 0.085 s a read here; a page at a time with the kernel's
    # readahead: 0.010). Sleeps decide it, not the machine's load.
    waited = moved["slot_wait_s"] / moved["reads"]
    assert waited >= LATENCY_MS / 1e3, f"the walk's {moved['reads']} reads waited {waited:.3f} s each for a slot"


def test_every_cold_request_waits_a_round_trip_and_at_most_in_flight_run_at_once(fs, backing):
    """16 one-page reads, far apart (no readahead joins them), from 16 threads."""
    cold(fs, backing, "blob")
    fd = os.open(fs.path("blob"), os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # exactly the page asked for
    offsets = [k * (256 << 10) for k in range(16)]
    before = fs.stats()
    start = time.perf_counter()
    threads = [threading.Thread(target=os.pread, args=(fd, 100, at)) for at in offsets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    os.close(fd)
    moved = fs.delta(before, fs.stats())
    assert moved["reads"] == len(offsets), f"expected one request a read, counted {moved['reads']}"
    floor = len(offsets) * LATENCY_MS / 1e3 / IN_FLIGHT
    assert seconds >= floor, f"{len(offsets)} cold requests took {seconds:.3f} s, under the {floor:.3f} s floor"
    assert moved["peak_in_flight"] <= IN_FLIGHT, f"{moved['peak_in_flight']} requests ran at once"
    assert moved["slot_wait_s"] > 0, "no request waited for a slot"


def test_byte_counter_counts_cold_reads_and_the_page_cache_serves_warm_ones(fs, backing):
    cold(fs, backing, "blob")
    before = fs.stats()
    with open(fs.path("blob"), "rb") as f:
        data = f.read()
    first = fs.delta(before, fs.stats())
    assert first["read_bytes"] == len(data) == 4 << 20, f"counted {first['read_bytes']} of {len(data)} bytes"
    assert sum(first["read_sizes_kib"].values()) == first["reads"] > 0
    before = fs.stats()
    with open(fs.path("blob"), "rb") as f:  # a reopen keeps the cache, as on NFS
        f.read()
    assert fs.delta(before, fs.stats())["read_bytes"] == 0, "a warm read went to the file system"


def test_bandwidth_caps_what_crosses_the_link(backing, binary):
    with mount(backing, binary, latency_ms=0, in_flight=32, bandwidth=40e6) as m:
        cold(m, backing, "blob")
        start = time.perf_counter()
        with open(m.path("blob"), "rb") as f:
            n = len(f.read())
        seconds = time.perf_counter() - start
        floor = n / 40e6
        assert seconds >= floor * 0.99, f"{n} bytes in {seconds:.3f} s: faster than 40 MB/s ({floor:.3f} s)"
        assert m.stats()["link_wait_s"] > 0


def test_close_unmounts_even_after_the_daemon_was_killed(backing, binary):
    m = mount(backing, binary, latency_ms=0)
    root = m.root
    os.kill(m._proc.pid, signal.SIGKILL)
    m._proc.wait()
    m.close()
    with open("/proc/self/mounts") as f:
        assert root not in [line.split()[1] for line in f], f"{root} still mounted"
    assert not os.path.exists(root)


def test_a_loader_over_the_whole_epoch_fills_chunks_a_part_reads_exactly(fs, backing, tmp_path):
    """On a network file system cache="auto" reads exactly the records, until
    lmdbloader.DataLoader says from its sampler that the epoch reads half of
    them or more (or LocalitySampler's whole chunks): then it fills chunks.
    The records read equal py-lmdb's either way."""
    with lmdb.open(os.path.join(backing, "wide"), readonly=True, lock=False) as env, env.begin() as txn:
        oracle = [v for _, v in txn.cursor()]
    ds = lmdbloader.LmdbDataset(fs.path("wide"), decode="raw", index_dir=str(tmp_path))
    assert ds.reader.stats()["cache_policy"] == "exact"
    rng = random.Random(5)
    for order, policy in [(rng.sample(range(15000), 15000), "fill"), (rng.sample(range(15000), 5000), "exact"),
                          (lmdbloader.LocalitySampler(ds), "fill"), (rng.sample(range(15000), 9000), "fill")]:
        loader = lmdbloader.DataLoader(ds, batch_size=500, sampler=order, collate_fn=lambda batch: batch)
        assert ds.reader.stats()["cache_policy"] == policy, (type(order), ds.reader.stats()["cache_policy"])
        got = [record for batch in loader for record in batch]
        assert got == [oracle[i] for i in order], "a record differs from py-lmdb's"
    assert ds.reader.stats()["chunks_filled"] > 0
    with pytest.raises(ValueError, match="share"):
        ds.reader.expect_share(1.5)


@pytest.fixture(scope="module")
def small_records(backing):
    """6,000 records of 3 KiB (a page each), 24 MiB: enough for the link probe."""
    path = os.path.join(backing, "small")
    with lmdb.open(path, map_size=64 << 20) as env, env.begin(write=True) as txn:
        for i in range(6000):
            txn.put(b"s%06d" % i, value(i)[:8] * 384)
    return "small"


def test_a_part_of_small_records_reads_around_them_only_where_the_link_is_not_the_limit(
        fs, backing, binary, small_records, tmp_path):
    """A third of 3 KiB records in random order: where the link's bandwidth
    is no limit (20 ms round trips, 4 in flight: the probe's large reads cost
    no more than its small ones) each record's read brings its 128 KiB window
    into the page cache and the third costs a request a window, not a record;
    behind a 20 MB/s link the windows would cost more than the records, so
    the reads stay exact. The records equal py-lmdb's either way."""
    with lmdb.open(os.path.join(backing, small_records), readonly=True, lock=False) as env, env.begin() as txn:
        oracle = [v for _, v in txn.cursor()]
    order = random.Random(7).sample(range(6000), 2000)
    slow_link = mount(backing, binary, latency_ms=1, in_flight=32, bandwidth=20e6)
    try:
        for m, around in [(fs, True), (slow_link, False)]:
            cold(m, backing, f"{small_records}/data.mdb")
            ds = lmdbloader.LmdbDataset(m.path(small_records), decode="raw", index_dir=str(tmp_path / str(around)))
            loader = lmdbloader.DataLoader(ds, batch_size=250, sampler=order, collate_fn=lambda batch: batch)
            stats = ds.reader.stats()
            assert (stats["cache_policy"], stats["read_around"] > 0) == ("exact", around), stats
            before = m.stats()
            got = [record for batch in loader for record in batch]
            moved = m.delta(before, m.stats())
            assert got == [oracle[i] for i in order], "a record differs from py-lmdb's"
            if around:  # 24 MiB in 128 KiB windows: at most 192 requests, and some more for the index
                assert moved["reads"] < 400, f"{moved['reads']} requests for {len(order)} records read around"
                # A worker started by spawn or forkserver unpickles the reader: told the share too.
                copy = pickle.loads(pickle.dumps(ds.reader))
                assert copy.stats()["read_around"] == stats["read_around"], copy.stats()
            else:
                assert moved["reads"] >= 0.9 * len(order), f"{moved['reads']} requests for {len(order)} exact records"
                assert moved["read_bytes"] < 2 * len(order) * 4096, f"{moved['read_bytes']} bytes moved"
    finally:
        slow_link.close()
