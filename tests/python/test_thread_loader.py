"""DataLoader(..., worker_method="thread"): worker threads in the calling
process. They give the process loader's batches bit for bit with one seed,
resume exactly from state_dict(), stop (break, del, an error, Ctrl-C, exit,
a fork meanwhile) within 5 s leaving no thread behind, and keep the job's
memory bounded by the kernel's count across epochs."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import torch
import torch.utils.data

import lmdbloader
from conftest import statm_rss
from synthetic_photos import image_folder_corpus, jpeg, photo

MiB = 1 << 20


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    images = [jpeg(photo(i, 64 + 7 * (i % 9), 48 + 5 * (i % 7))) for i in range(40)]
    return image_folder_corpus(tmp_path_factory.mktemp("photos"), images, classes=3)


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("clips") / "corpus")
    with lmdbloader.CorpusWriter(path) as w:
        for i in range(16):
            frames = [jpeg(photo(100 + i * 7 + f, 72, 56)) for f in range(5 + i % 4)]
            w.add(f"clip{i:03d}", {"frames": frames, "label": i % 4}, label=i % 4)
    return path


def recipe(name, photos, clips):
    crops = [lmdbloader.Crop(32, scale=(0.3, 1.0), jitter=(0.4, 0.4, 0.2, 0.1), jitter_p=0.8, gray_p=0.2,
                             blur_p=0.5),
             lmdbloader.Crop(16, n=2, scale=(0.05, 0.3), solarize_p=0.3)]
    return {"train": lambda: lmdbloader.LmdbDataset(photos, decode=lmdbloader.ImageDecode(32)),
            "crops": lambda: lmdbloader.LmdbDataset(photos, decode=lmdbloader.ImageDecode(crops=crops)),
            "clips": lambda: lmdbloader.LmdbDataset(clips, decode=lmdbloader.ClipDecode(24, frames=4, stride=2)),
            "tensor": lambda: lmdbloader.LmdbDataset(photos, decode="tensor")}[name]()


def flat(batch):
    """Every tensor of a batch, cloned, in order."""
    if isinstance(batch, torch.Tensor):
        return [batch.clone()]
    return [t for part in batch for t in flat(part)]


def epoch(loader):
    return [flat(b) for b in loader]


def same_batches(a, b):
    return len(a) == len(b) and all(len(x) == len(y) and all(torch.equal(s, t) for s, t in zip(x, y))
                                    for x, y in zip(a, b))


def tasks():
    return len(os.listdir("/proc/self/task"))


def loader(ds, method="thread", seed=11, **kw):
    kw = {"batch_size": 4, "num_workers": 2, "shuffle": True, **kw}
    if method == "multiprocessing":
        kw.setdefault("multiprocessing_context", "fork")
    return lmdbloader.DataLoader(ds, generator=torch.Generator().manual_seed(seed), worker_method=method, **kw)


@pytest.mark.parametrize("name", ["train", "crops", "clips", "tensor"])
def test_threads_give_the_process_loaders_batches(photos, clips, name):
    ds = recipe(name, photos, clips)
    processes = epoch(loader(ds, "multiprocessing"))
    threads = epoch(loader(ds))
    assert len(threads) == len(ds) // 4 and same_batches(threads, processes)
    assert not same_batches(epoch(loader(ds, seed=12)), threads) or name == "tensor"


def test_batches_do_not_depend_on_how_many_threads_are_ahead(photos):
    """Three threads, one prefetching 1 and one 4 batches, a thread slowed
    down at random: batch i is still worker i mod 3's, drawn from its own
    generator, so the batches are the processes'."""
    ds = recipe("train", photos, None)
    want = epoch(loader(ds, "multiprocessing", num_workers=3))

    def slow(worker_id):
        if worker_id == 1:
            time.sleep(0.2)
    for prefetch in (1, 4):
        got = epoch(loader(ds, num_workers=3, prefetch_factor=prefetch, worker_init_fn=slow))
        assert same_batches(got, want), f"prefetch_factor={prefetch}"


@pytest.mark.parametrize("generator", [True, False])
def test_a_resumed_loader_delivers_what_the_uninterrupted_one_would(photos, generator):
    ds = recipe("crops", photos, None)

    def make():
        torch.manual_seed(5)
        kw = {"generator": torch.Generator().manual_seed(9)} if generator else {}
        return lmdbloader.DataLoader(ds, batch_size=3, num_workers=2, shuffle=True, worker_method="thread", **kw)
    whole = epoch(make())
    first = make()
    it = iter(first)
    head = [flat(b) for _, b in zip(range(4), it)]
    state = first.state_dict()
    del it, first
    torch.manual_seed(1234)  # the script's generator moved on: the resumed order is the interrupted run's anyway
    resumed = make()
    resumed.load_state_dict(state)
    tail = epoch(resumed)
    assert len(head) == 4 and same_batches(head + tail, whole)
    assert resumed.state_dict() == {}  # the epoch ended: the next starts afresh
    with pytest.raises(ValueError, match="num_workers=2"):
        lmdbloader.DataLoader(ds, batch_size=3, num_workers=3, worker_method="thread").load_state_dict(state)


def test_samplers_and_arguments_as_torch_takes_them(photos):
    ds = recipe("tensor", photos, None)
    cases = [dict(batch_size=6, drop_last=True), dict(batch_size=6), dict(batch_size=None),
             dict(batch_sampler=torch.utils.data.BatchSampler(range(0, 40, 3), 5, False)),
             dict(sampler=torch.utils.data.DistributedSampler(ds, num_replicas=2, rank=1, seed=3), batch_size=4),
             dict(batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(3))]
    for kw in cases:
        for workers in (0, 2):
            # torch's own iterator (in this process) for the order
            plain = lmdbloader.DataLoader(ds, **kw)
            got = lmdbloader.DataLoader(ds, num_workers=workers, worker_method="thread", **kw)
            assert len(got) == len(plain)
            for _ in range(2):  # iterated twice
                if "generator" in kw:
                    kw["generator"].manual_seed(3)
                want = epoch(plain)
                if "generator" in kw:
                    kw["generator"].manual_seed(3)
                assert same_batches(epoch(got), want), (kw, workers)


class Numbers(torch.utils.data.Dataset):
    """Not lmdbloader's: each sample says which thread made it and draws from that thread's generator."""

    def __len__(self):
        return 24

    def __getitem__(self, i):
        info = torch.utils.data.get_worker_info()
        return {"i": i, "worker": -1 if info is None else info.id,
                "draw": torch.rand(1, generator=None if info is None else info.rng.torch_generator)}


def test_worker_info_answers_in_each_thread_and_not_elsewhere():
    seen = []

    def init(worker_id):
        info = torch.utils.data.get_worker_info()
        seen.append((worker_id, info.id, info.num_workers, info.seed, threading.current_thread().name))
    got = lmdbloader.DataLoader(Numbers(), batch_size=4, num_workers=3, worker_init_fn=init, worker_method="thread",
                                generator=torch.Generator().manual_seed(2))
    batches = list(got)
    base = torch.empty((), dtype=torch.int64).random_(generator=torch.Generator().manual_seed(2)).item()
    assert sorted(seen) == [(w, w, 3, base + w, f"lmdbloader_worker_{w}") for w in range(3)]
    assert [b["worker"].tolist() for b in batches] == [[k % 3] * 4 for k in range(6)]
    assert torch.utils.data.get_worker_info() is None
    again = list(lmdbloader.DataLoader(Numbers(), batch_size=4, num_workers=3, worker_init_fn=init,
                                       worker_method="thread", generator=torch.Generator().manual_seed(2)))
    assert all(torch.equal(a["draw"], b["draw"]) for a, b in zip(batches, again))


def test_auto_takes_threads_only_where_every_step_is_lmdbloaders(photos):
    fused = recipe("train", photos, None)
    assert lmdbloader.DataLoader(fused, num_workers=2, worker_method="auto").worker_method == "thread"
    assert lmdbloader.DataLoader(recipe("tensor", photos, None), num_workers=2,
                                 worker_method="auto").worker_method == "thread"
    transformed = lmdbloader.LmdbDataset(photos, decode=lmdbloader.ImageDecode(32), transform=lambda x: x)
    for ds, kw in [(transformed, {}), (Numbers(), {}), (fused, {"worker_init_fn": print}),
                   (fused, {"multiprocessing_context": "fork"}), (fused, {"collate_fn": torch.utils.data.default_collate}),
                   (lmdbloader.LmdbDataset(photos, decode=bytes), {})]:
        assert lmdbloader.DataLoader(ds, num_workers=2, worker_method="auto", **kw).worker_method == "multiprocessing"
    assert lmdbloader.DataLoader(fused, num_workers=2).worker_method == "multiprocessing"


def test_bad_arguments_name_the_option(photos):
    ds = recipe("train", photos, None)
    with pytest.raises(ValueError, match="worker_method must be one of 'multiprocessing', 'thread', 'auto'"):
        lmdbloader.DataLoader(ds, worker_method="threads")

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(3))
    with pytest.raises(ValueError, match="IterableDataset runs with worker_method='multiprocessing'"):
        lmdbloader.DataLoader(Stream(), num_workers=2, worker_method="thread")
    with pytest.raises(ValueError, match="multiprocessing_context"):
        lmdbloader.DataLoader(ds, num_workers=2, worker_method="thread", multiprocessing_context="spawn")
    with pytest.raises(RuntimeError, match="StatefulDataLoader"):
        lmdbloader.DataLoader(ds, num_workers=2).state_dict()
    with pytest.raises(TypeError, match="state must be"):
        lmdbloader.DataLoader(ds, num_workers=2, worker_method="thread").load_state_dict([1])
    with pytest.warns(UserWarning, match="pin_memory"):
        assert len(epoch(lmdbloader.DataLoader(ds, batch_size=8, num_workers=2, pin_memory=True,
                                               worker_method="thread"))) == 5


def hanging(seconds):
    def decode(record):
        time.sleep(seconds)
        return len(record)
    return decode


def failing(record):
    if len(record) % 7 == 3:
        raise ValueError(f"cannot decode a record of {len(record)} bytes")
    return len(record)


@pytest.mark.parametrize("case", ["break", "del", "error", "interrupt", "timeout", "persistent"])
def test_every_way_of_stopping_ends_within_5_s_and_leaves_no_thread(photos, case):
    before_threads, before_tasks = set(threading.enumerate()), tasks()
    start = time.monotonic()
    kw = dict(batch_size=2, num_workers=3, worker_method="thread")
    if case in ("break", "del", "persistent"):
        got = lmdbloader.DataLoader(recipe("train", photos, None), persistent_workers=case == "persistent", **kw)
        for i, _ in enumerate(got):
            if i == 2:
                break
        if case != "break":
            del got
    elif case == "error":
        ds = lmdbloader.LmdbDataset(photos, decode=failing)
        sizes = [len(ds.reader[i]) for i in range(len(ds))]
        bad = next(i for i, s in enumerate(sizes) if s % 7 == 3)
        delivered = 0
        with pytest.raises(ValueError, match="cannot decode a record") as raised:
            for _ in lmdbloader.DataLoader(ds, **kw):
                delivered += 1
        assert delivered == bad // 2
        if sys.version_info >= (3, 11):  # the record and file named, as the process loader names them
            assert f"record {bad} of {ds.reader.path}" in " ".join(raised.value.__notes__)
    elif case == "interrupt":
        timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            for _ in lmdbloader.DataLoader(lmdbloader.LmdbDataset(photos, decode=hanging(0.3)), **kw):
                pass
        timer.join()
    else:
        with pytest.raises(RuntimeError, match=r"DataLoader timed out after 0.5 seconds"):
            for _ in lmdbloader.DataLoader(lmdbloader.LmdbDataset(photos, decode=hanging(1.0)), timeout=0.5, **kw):
                pass
    while (set(threading.enumerate()) - before_threads or tasks() > before_tasks) and time.monotonic() - start < 5:
        time.sleep(0.05)
    assert time.monotonic() - start < 5
    assert not set(threading.enumerate()) - before_threads and tasks() <= before_tasks


def run_script(code, tmp_path, timeout=30):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    # The child imports what this process does: conftest put the tree's
    # package first on PYTHONPATH, or left the installed one.
    start = time.monotonic()
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - start


def test_the_interpreter_exits_and_a_fork_meanwhile_does_not_deadlock(photos, tmp_path):
    """Threads mid-epoch: a forked child reads the dataset, runs a loader of
    its own and exits; then the parent exits without closing its loader."""
    done, took = run_script(f"""
        import os, time, torch, lmdbloader
        ds = lmdbloader.LmdbDataset({photos!r}, decode=lmdbloader.ImageDecode(32))
        it = iter(lmdbloader.DataLoader(ds, batch_size=2, num_workers=4, worker_method="thread"))
        next(it)
        for _ in range(3):
            pid = os.fork()
            if pid == 0:
                ds[0]
                sum(len(b) for b in lmdbloader.DataLoader(ds, batch_size=4, num_workers=2, worker_method="thread"))
                try:
                    next(it)
                except RuntimeError as e:
                    assert "before fork()" in str(e), e
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            assert status == 0, status
            next(it)
        print("exiting", time.monotonic(), flush=True)
    """, tmp_path, timeout=120)
    exited = time.monotonic()  # one clock for every process of the machine
    assert done.returncode == 0 and "exiting" in done.stdout, done.stderr
    # A deadlock runs into the timeout; the exit itself (the loader's
    # threads stopping with the interpreter) takes well under 5 s, whatever
    # the machine's load did to the forks' epochs before it.
    assert exited - float(done.stdout.split()[-1]) < 5, done.stdout


def test_the_jobs_memory_stays_bounded_across_epochs(photos):
    """The kernel's count of this process (every thread is in it): three
    epochs of batches dropped as they come hold no more than the first, and
    the pool keeps at most W x (prefetch_factor + 1) buffers."""
    ds = recipe("crops", photos, None)
    for persistent in (False, True):
        got = lmdbloader.DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=persistent,
                                    worker_method="thread")
        sizes = []
        for _ in range(3):
            for batch in got:
                del batch
            sizes.append(statm_rss())
        stats = got.ring_stats()
        assert stats["buffers"] <= 2 * 3 and stats["reused"] > 0 and stats["fresh"] == 0, stats
        assert sizes[2] - sizes[0] < 8 * MiB, sizes
    kept = [b for b in lmdbloader.DataLoader(ds, batch_size=4, num_workers=1, worker_method="thread")]
    assert len(kept) == 10  # every buffer held: fresh ones, never a wait


def test_batches_of_every_size_reuse_what_fits_and_never_wait(photos):
    """Batches of 1 to 9 records of several lengths: each in a free buffer
    big enough, a new one while the pool has room, else in place of a
    free one too small; kept batches take fresh ones; every batch intact."""
    ds = recipe("tensor", photos, None)
    sizes = [1, 9, 2, 9, 3, 1, 8, 4, 2]
    batches = [list(range(sum(sizes[:k]) % 30, sum(sizes[:k]) % 30 + n)) for k, n in enumerate(sizes)]
    got = lmdbloader.DataLoader(ds, batch_sampler=batches * 2, num_workers=2, worker_method="thread")
    want = [[ds[i] for i in b] for b in batches * 2]
    for batch, records in zip(got, want):
        assert [t.tolist() for t in batch] == [r.tolist() for r in records]
    stats = got.ring_stats()
    assert stats["batches"] == 18 and stats["buffers"] <= 2 * 3 and stats["reused"] >= 1, stats
    kept = list(got)
    assert all([t.tolist() for t in b] == [r.tolist() for r in w] for b, w in zip(kept, want))
    assert got.ring_stats()["fresh"] >= 1


def test_the_pool_takes_the_smallest_free_buffer_that_fits():
    from lmdbloader._buffer_pool import BufferPool
    pool = BufferPool(3)
    leases = [pool.lease(n) for n in (1 * MiB, 100 << 10, 400 << 10)]
    sizes = [lease.base.nbytes for lease, _ in leases]
    del leases  # all three free again
    lease, at = pool.lease(300 << 10)
    assert lease.base.nbytes == sizes[2] and (lease.ctypes.data + at) % 64 == 0
    held = [pool.lease(1 * MiB), pool.lease(1 * MiB)]  # the 1 MiB one, then a new one in place of the smallest
    assert sorted(h.base.nbytes for h, _ in held) == [sizes[0]] * 2
    stats = pool.stats()
    assert (stats["reused"], stats["new"], stats["fresh"], stats["buffers"], stats["held"]) == (2, 4, 0, 3, 3), stats
    extra, _ = pool.lease(10)  # every buffer held: a fresh one, not kept
    assert pool.stats()["fresh"] == 1 and pool.stats()["buffers"] == 3
    del lease, held, extra
    assert pool.stats()["held"] == 0
