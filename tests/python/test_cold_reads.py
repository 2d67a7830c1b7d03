"""Batched reads from Python (every engine, the io_uring fallback, bad
batches), the page cache policies as the kernel reports them, and
LocalitySampler (blocks, windows, rank splits, StatefulDataLoader resume)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import lmdbloader
from conftest import stop_and_resume

ENGINES = ("io_uring", "threads", "sync")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """600 records of 5000 bytes (overflow pages) written class by class."""
    path = str(tmp_path_factory.mktemp("cold") / "c")
    with lmdbloader.CorpusWriter(path) as w:
        for i in range(600):
            w.add(f"r{i}", bytes([i % 251]) * 4000 + i.to_bytes(4, "little") * 250, label=i // 60)
    return path


def expected(i):
    return bytes([i % 251]) * 4000 + i.to_bytes(4, "little") * 250


@pytest.mark.parametrize("engine", ENGINES)
def test_get_batch_returns_exact_bytes_with_every_engine(corpus, engine):
    r = lmdbloader.Reader(corpus, io_engine=engine, index_dir="none")
    assert r.stats()["io_engine"] == engine
    order = np.random.default_rng(1).permutation(len(r)).tolist() + [5, 5]
    assert r.get_batch(order) == [expected(i) for i in order]
    assert r.stats()["records_read"] == len(order)


def test_io_uring_blocked_falls_back_to_threads_and_reports_why(corpus):
    code = ("import lmdbloader, json; r = lmdbloader.Reader(%r, index_dir='none'); s = r.stats(); "
            "assert r.get_batch(range(0, 600, 7)) == [%s(i) for i in range(0, 600, 7)]; "
            "print(json.dumps([s['io_engine'], s['io_fallback']]))") % (corpus, "__import__('test_cold_reads').expected")
    env = dict(os.environ, LMDBLOADER_DISABLE_IO_URING="1",
               PYTHONPATH=os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    engine, why = __import__("json").loads(out.stdout)
    assert engine == "threads"
    assert "io_uring" in why


def test_explicit_io_uring_when_blocked_is_an_oserror_naming_io_uring(corpus, monkeypatch):
    monkeypatch.setenv("LMDBLOADER_DISABLE_IO_URING", "1")
    with pytest.raises(OSError, match="io_uring"):
        lmdbloader.Reader(corpus, io_engine="io_uring", index_dir="none")


@pytest.mark.parametrize("kwargs, error", [
    (dict(io_engine="aio"), ValueError), (dict(cache="keep"), ValueError), (dict(queue_depth=0), ValueError),
    (dict(queue_depth=5000), ValueError), (dict(queue_depth="8"), TypeError), (dict(queue_depth=True), TypeError),
])
def test_bad_io_options_are_refused(corpus, kwargs, error):
    with pytest.raises(error):
        lmdbloader.Reader(corpus, **kwargs)


@pytest.mark.parametrize("engine", ENGINES)
def test_batch_with_an_out_of_range_index_raises_index_error_and_reads_nothing(corpus, engine):
    r = lmdbloader.Reader(corpus, io_engine=engine, index_dir="none")
    with pytest.raises(IndexError, match="600"):
        r.get_batch([1, 2, 600])
    assert r.stats()["records_read"] == 0


@pytest.mark.parametrize("engine", ENGINES)
def test_damaged_record_in_a_batch_is_corruption_naming_record_and_file(tmp_path, corpus, engine):
    import shutil
    path = str(tmp_path / "damaged")
    shutil.copytree(corpus, path)
    r = lmdbloader.Reader(path, index_dir="none")
    data = os.path.join(path, "data.mdb")
    # Flip one byte inside record 321's value (its position in the file is known).
    at = int(r.record_positions()[321]) + 100
    with open(data, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0xFF]))
    r = lmdbloader.Reader(path, io_engine=engine, index_dir="none", cache="exact")
    with pytest.raises(lmdbloader.CorruptedError, match=r"record 321 .*data\.mdb"):
        r.get_batch([1, 2, 321, 4])


@pytest.mark.parametrize("cache", ["fill", "exact", "drop"])
@pytest.mark.parametrize("mode", ["pread", "mmap"])
def test_scan_reads_every_record_of_every_pass_while_prefetching_the_next_batch(tmp_path, corpus, cache, mode):
    """lmdbloader scan prefetches batch k+1 on another thread while batch k is
    read: every record of every pass is read and checked, whatever the batch,
    cache policy and mode, and a damaged record still fails the scan naming it."""
    import json
    import shutil
    for batch in ("1", "7", "600"):
        res = subprocess.run(["lmdbloader", "scan", corpus, "--batch", batch, "--passes", "3", "--cache", cache,
                              "--mode", mode, "--index-dir", "none", "--json"], capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 0, res.stderr
        report = json.loads(res.stdout)
        assert report["records"] == 1800 and report["bytes"] == 1800 * 5000, report
    # No records at all: nothing to prefetch (this once indexed past the batch list).
    import lmdb
    empty = str(tmp_path / "empty")
    lmdb.open(empty).close()
    res = subprocess.run(["lmdbloader", "scan", empty, "--cache", cache, "--mode", mode, "--index-dir", "none",
                          "--json"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and json.loads(res.stdout)["records"] == 0, res
    path = str(tmp_path / "damaged")
    shutil.copytree(corpus, path)
    at = int(lmdbloader.Reader(path, index_dir="none").record_positions()[433]) + 7
    with open(os.path.join(path, "data.mdb"), "r+b") as f:
        f.seek(at)
        f.write(b"\xee")
    res = subprocess.run(["lmdbloader", "scan", path, "--batch", "7", "--cache", cache, "--mode", mode,
                          "--index-dir", "none"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "record 433 of" in res.stderr and "data.mdb" in res.stderr, res


def test_file_truncated_under_the_reader_raises_corrupted_error(tmp_path, corpus):
    import shutil
    path = str(tmp_path / "t")
    shutil.copytree(corpus, path)
    r = lmdbloader.Reader(path, index_dir="none", cache="exact")
    data = os.path.join(path, "data.mdb")
    os.truncate(data, os.path.getsize(data) // 2)
    with pytest.raises(lmdbloader.CorruptedError, match="truncated"):
        r.get_batch(range(600))


def _page_cache():
    """bench/page_cache.py: eviction and mincore counts."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    import page_cache
    return page_cache


def test_cache_drop_leaves_the_file_out_of_the_page_cache_and_exact_keeps_it(corpus):
    page_cache = _page_cache()
    data = os.path.join(corpus, "data.mdb")
    records_bytes = 600 * 5000
    for cache in ("drop", "exact"):
        r = lmdbloader.Reader(corpus, cache=cache, index_dir="none")
        page_cache.evict(corpus)
        r.get_batch(np.random.default_rng(2).permutation(600).tolist())
        cached = page_cache.cached_bytes(data)
        if cache == "drop":
            assert cached < records_bytes // 10, cached
        else:
            assert cached >= records_bytes, cached


def test_cache_fill_caches_whole_chunks_without_growing_rss(corpus):
    page_cache = _page_cache()
    data = os.path.join(corpus, "data.mdb")
    r = lmdbloader.Reader(corpus, cache="fill", index_dir="none")
    page_cache.evict(corpus)
    with open("/proc/self/statm") as f:
        rss_before = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    assert r.get_batch([0, 599]) == [expected(0), expected(599)]
    with open("/proc/self/statm") as f:
        rss_after = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    s = r.stats()
    assert s["cache_policy"] == "fill" and s["chunks_filled"] >= 1
    # Two records read, the whole (small) file cached; none of it mapped here.
    assert page_cache.cached_bytes(data) >= os.path.getsize(data) * 9 // 10
    assert s["mapped_rss"] == 0
    assert rss_after - rss_before < 2 << 20


# --- LocalitySampler -------------------------------------------------------

def test_sampler_epoch_is_a_permutation_with_block_local_windows(corpus):
    r = lmdbloader.Reader(corpus, index_dir="none")
    positions = r.record_positions()
    s = lmdbloader.LocalitySampler(r, block_bytes="256KiB", window=2, seed=3)
    order = list(s)
    assert sorted(order) == list(range(600)) and len(s) == 600
    blocks = positions[order] // (256 << 10)
    # Records of one window come from at most `window` blocks, and each block
    # is consumed inside a single window.
    per_block = {}
    for k, b in enumerate(blocks):
        per_block.setdefault(int(b), []).append(k)
    spans = sorted((min(v), max(v)) for v in per_block.values())
    windows = []
    for lo, hi in spans:
        if windows and lo <= windows[-1][1]:
            windows[-1][1] = max(windows[-1][1], hi)
            windows[-1][2] += 1
        else:
            windows.append([lo, hi, 1])
    assert max(w[2] for w in windows) <= 2
    assert s.num_blocks == len(per_block)


def test_sampler_reshuffles_per_epoch_and_repeats_per_seed(corpus):
    r = lmdbloader.Reader(corpus, index_dir="none")
    a = lmdbloader.LocalitySampler(r, block_bytes="64KiB", seed=1)
    b = lmdbloader.LocalitySampler(r, block_bytes="64KiB", seed=1)
    first = list(a)
    assert first == list(b)
    a.set_epoch(1)
    assert list(a) != first and sorted(a) == sorted(first)


@pytest.mark.parametrize("drop_last", [False, True])
def test_sampler_ranks_are_disjoint_equal_and_cover_the_epoch(corpus, drop_last):
    ds_len = 600
    parts = [list(lmdbloader.LocalitySampler(lmdbloader.Reader(corpus, index_dir="none"), num_replicas=7, rank=k,
                                             drop_last=drop_last, block_bytes="64KiB")) for k in range(7)]
    assert len({len(p) for p in parts}) == 1
    flat = [i for p in parts for i in p]
    if drop_last:
        assert len(set(flat)) == len(flat) == ds_len // 7 * 7
    else:
        assert set(flat) == set(range(ds_len)) and len(flat) == -(-ds_len // 7) * 7


@pytest.mark.parametrize("kwargs, error", [
    (dict(window=0), ValueError), (dict(rank=2, num_replicas=2), ValueError), (dict(block_bytes="x"), ValueError),
    (dict(window=True), TypeError),
])
def test_sampler_refuses_bad_arguments(corpus, kwargs, error):
    with pytest.raises(error):
        lmdbloader.LocalitySampler(lmdbloader.Reader(corpus, index_dir="none"), **kwargs)


def test_sampler_refuses_what_is_not_a_reader():
    with pytest.raises(TypeError, match="Reader"):
        lmdbloader.LocalitySampler(list(range(10)))


def test_sampler_with_stateful_dataloader_resumes_mid_epoch_exactly(corpus):
    sdl = pytest.importorskip("torchdata.stateful_dataloader")

    def loader():
        ds = lmdbloader.LmdbDataset(corpus, decode=lambda raw: int.from_bytes(raw[-4:], "little"),
                                    index_dir="none")
        sampler = lmdbloader.LocalitySampler(ds, block_bytes="64KiB", window=3, seed=5)
        sampler.set_epoch(2)
        return sdl.StatefulDataLoader(ds, batch_size=8, sampler=sampler, num_workers=2)

    uninterrupted, resumed = stop_and_resume(loader, stop_after=11)
    assert sorted(uninterrupted) == list(range(600))
    assert resumed == uninterrupted


# --- apply_batch -----------------------------------------------------------

def test_apply_batch_equals_fn_of_each_record_and_propagates_errors(corpus):
    r = lmdbloader.Reader(corpus, index_dir="none")
    order = np.random.default_rng(4).permutation(600).tolist()
    assert r.apply_batch(order, len) == [5000] * 600
    assert r.apply_batch(order[:40], lambda raw: raw) == [expected(i) for i in order[:40]]
    with pytest.raises(ZeroDivisionError):
        r.apply_batch([1, 2], lambda raw: 1 / 0)
    with pytest.raises(TypeError):
        r.apply_batch([1], "not callable")
    with pytest.raises(IndexError):
        r.apply_batch([1, 600], len)


def test_apply_batch_of_large_records_does_not_fault_every_page_in_again(tmp_path):
    """A batch of 1 MiB records held whole is freed back to the kernel and
    faults in again (about 255 minor faults per record, getrusage); applied a
    record at a time, the allocator reuses the memory."""
    import resource
    path = str(tmp_path / "big")
    with lmdbloader.CorpusWriter(path) as w:
        for i in range(24):
            w.add(str(i), bytes([i]) * (1 << 20))
    r = lmdbloader.Reader(path, index_dir="none")

    def faults_per_record(read):
        read()  # the allocator's first growth is not counted
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(3):
            read()
        return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 72

    def digest(raw):
        return raw[-1]

    held = faults_per_record(lambda: [digest(b) for b in r.get_batch(range(24))])
    applied = faults_per_record(lambda: r.apply_batch(range(24), digest))
    assert applied < 32, (applied, held)
    assert held > 4 * applied, (applied, held)


# --- zero-copy views ---------------------------------------------------------

def test_apply_batch_views_hands_fn_exact_read_only_memoryviews(corpus):
    r = lmdbloader.Reader(corpus, mode="mmap", index_dir="none")
    order = np.random.default_rng(5).permutation(600).tolist()
    seen = r.apply_batch(order, lambda v: (type(v), v.readonly, bytes(v)), views=True)
    assert seen == [(memoryview, True, expected(i)) for i in order]
    # A view kept past fn stays valid: it holds its mapping, even after close().
    kept = r.apply_batch([7, 8], lambda v: v, views=True)
    r.close()
    assert [bytes(v) for v in kept] == [expected(7), expected(8)]


def test_apply_batch_views_refuses_pread_mode_and_checks_indices(corpus):
    r = lmdbloader.Reader(corpus, index_dir="none")
    with pytest.raises(ValueError, match="mode='mmap'.*pread"):
        r.apply_batch([1], len, views=True)
    m = lmdbloader.Reader(corpus, mode="mmap", index_dir="none")
    with pytest.raises(IndexError):
        m.apply_batch([1, 600], len, views=True)
    with pytest.raises(ZeroDivisionError):
        m.apply_batch([1], lambda v: 1 / 0, views=True)


def test_apply_batch_views_checks_checksums_in_place(tmp_path, corpus):
    import shutil
    path = str(tmp_path / "damaged")
    shutil.copytree(corpus, path)
    at = int(lmdbloader.Reader(path, index_dir="none").record_positions()[222]) + 7
    with open(os.path.join(path, "data.mdb"), "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 1]))
    r = lmdbloader.Reader(path, mode="mmap", index_dir="none")
    with pytest.raises(lmdbloader.CorruptedError, match=r"record 222 .*data\.mdb"):
        r.apply_batch([1, 222, 3], len, views=True)
    off = lmdbloader.Reader(path, mode="mmap", index_dir="none", verify_checksums=False)
    assert off.apply_batch([222], bytes, views=True)[0] != expected(222)


def test_cold_views_ask_for_the_batch_pages_before_touching_them(corpus):
    """A cold batch of views asks for all its pages before the first checksum
    touches one: the touches then find the pages in the page cache (no major
    fault, getrusage), where faulting each record in would wait for the
    device page by page (the mapping is MADV_RANDOM)."""
    import resource
    page_cache = _page_cache()
    data = os.path.join(corpus, "data.mdb")
    for cache in ("exact", "fill"):
        r = lmdbloader.Reader(corpus, mode="mmap", cache=cache, index_dir="none")
        page_cache.evict(corpus)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
        assert r.apply_batch(range(0, 600, 3), len, views=True) == [5000] * 200
        major = resource.getrusage(resource.RUSAGE_SELF).ru_majflt - before
        assert page_cache.cached_bytes(data) >= 200 * 5000
        assert r.stats()["cache_policy"] == cache
        if cache == "exact":
            assert major < 20, major
        r.close()  # unmaps: mapped pages cannot be evicted
    # The control: touching the cold records one at a time faults them in.
    m = lmdbloader.Reader(corpus, mode="mmap", cache="exact", index_dir="none")
    page_cache.evict(corpus)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
    assert [len(m.view(i)) for i in range(0, 600, 3)] == [5000] * 200
    assert resource.getrusage(resource.RUSAGE_SELF).ru_majflt - before >= 200


def test_dataset_views_match_bytes_through_dataloader_workers(corpus):
    from torch.utils.data import DataLoader
    digest = lambda raw: (len(raw), bytes(raw[-8:]))  # noqa: E731
    plain = lmdbloader.LmdbDataset(corpus, decode=digest, index_dir="none")
    views = lmdbloader.LmdbDataset(corpus, decode=digest, views=True, index_dir="none")
    assert views.stats()["mode"] == "mmap"
    assert views[5] == plain[5]

    def load(ds):
        return [x for b in DataLoader(ds, batch_size=32, num_workers=2, collate_fn=lambda b: b) for x in b]
    assert load(views) == load(plain)


@pytest.mark.parametrize("kwargs, error", [
    (dict(decode="raw", views=True), "decode callable"),
    (dict(decode="msgpack", views=True), "decode callable"),
    (dict(decode=len, views=True, mode="pread"), "mode='mmap'"),
    # The image decoders read a batch's records in one call of their own: views would be ignored.
    (dict(decode=lmdbloader.ImageDecode(32), views=True), "ImageDecode reads a batch's records itself"),
    (dict(decode=lmdbloader.ClipDecode(32), views=True), "ClipDecode reads a batch's records itself"),
])
def test_dataset_views_refuse_what_cannot_take_a_view(corpus, kwargs, error):
    with pytest.raises(ValueError, match=error):
        lmdbloader.LmdbDataset(corpus, index_dir="none", **kwargs)
