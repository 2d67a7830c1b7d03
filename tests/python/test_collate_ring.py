"""lmdbloader.collate and lmdbloader.DataLoader: batches through a ring of
reused shared memory. Compared with torch's default_collate (the oracle);
batches kept by the consumer stay intact; nothing blocks, leaks or is left in
/dev/shm, whatever process dies."""

import collections
import errno
import gc
import io
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader, default_collate

import lmdbloader
from lmdbloader import _ring_main as ring_main
from lmdbloader import _ring_worker as ring_worker

sys.path.insert(0, os.path.dirname(__file__))
from ring_samples import Numbered, Samples, Uneven, first_byte_and_record  # noqa: E402

RECORD = 16 << 10
RECORDS = 96


def record_bytes(i, size=RECORD):
    return i.to_bytes(4, "little") * (size // 4)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("ring") / "fixed")
    with lmdbloader.CorpusWriter(path) as w:
        for i in range(RECORDS):
            w.add(f"r{i}", record_bytes(i), label=i)
    return path


@pytest.fixture(scope="module")
def ragged(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("ring") / "ragged")
    with lmdbloader.CorpusWriter(path) as w:
        for i in range(RECORDS):
            w.add(f"r{i}", record_bytes(i, 4 * (1 + i % 7) * 100))
    return path


def same(a, b, where="batch"):
    """a equals b as default_collate's output: types, dtypes, shapes, values."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a.dtype}{tuple(a.shape)} != {b.dtype}{tuple(b.shape)}"
        assert a.is_contiguous() == b.is_contiguous() and a.stride() == b.stride(), where
        assert torch.equal(a, b) or (a.is_floating_point() and torch.equal(a.isnan(), b.isnan())
                                     and torch.equal(a.nan_to_num(), b.nan_to_num())), f"{where}: values differ"
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for k, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{k}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def rows(batch):
    """The record numbers of a [B, L] batch of record_bytes rows."""
    return batch[:, :4].contiguous().view(torch.int32).reshape(-1).tolist()


def intact(batch):
    expect = torch.stack([torch.frombuffer(bytearray(record_bytes(i, batch.shape[1])), dtype=torch.uint8)
                          for i in rows(batch)])
    return torch.equal(batch, expect)


# ------------------------------------------------------- equal to default_collate

Point = collections.namedtuple("Point", "x y")

DTYPES = [torch.float32, torch.float64, torch.int64, torch.int32, torch.uint8, torch.bool, torch.float16,
          torch.complex64]


@st.composite
def leaves(draw, seed):
    kind = draw(st.sampled_from(["tensor", "ndarray", "int", "float", "bool", "str", "bytes", "npscalar"]))
    shape = tuple(draw(st.lists(st.integers(0, 5), max_size=3)))
    dtype = draw(st.sampled_from(DTYPES))
    return kind, shape, dtype


def make_leaf(spec, i):
    kind, shape, dtype = spec
    g = torch.Generator().manual_seed(i)
    if kind in ("tensor", "ndarray"):
        t = (torch.rand(shape, generator=g) * 100).to(dtype)
        return t if kind == "tensor" else t.numpy()
    return {"int": i * 7 - 3, "float": i / 3, "bool": i % 2 == 0, "str": f"s{i}", "bytes": b"b%d" % i,
            "npscalar": np.float32(i) / 2}[kind]


@st.composite
def structures(draw, depth=0):
    if depth >= 3 or draw(st.booleans()):
        return ("leaf", draw(leaves(0)))
    kind = draw(st.sampled_from(["dict", "tuple", "list", "namedtuple"]))
    n = 2 if kind == "namedtuple" else draw(st.integers(1, 3))
    return (kind, [draw(structures(depth + 1)) for _ in range(n)])


def build(spec, i):
    kind, parts = spec
    if kind == "leaf":
        return make_leaf(parts, i)
    items = [build(p, i) for p in parts]
    return {"dict": lambda: {f"k{j}": v for j, v in enumerate(items)}, "tuple": lambda: tuple(items),
            "list": lambda: items, "namedtuple": lambda: Point(*items)}[kind]()


@settings(max_examples=int(os.environ.get("RING_DIFF_EXAMPLES", "25")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(structures(), st.integers(1, 5))
def test_collate_returns_what_default_collate_returns_across_workers(spec, batch_size):
    samples = [build(spec, i) for i in range(12)]
    expected = list(DataLoader(Samples(samples), batch_size=batch_size, num_workers=0))
    got = list(DataLoader(Samples(samples), batch_size=batch_size, num_workers=2,
                          collate_fn=lmdbloader.Collate(slots=2)))
    assert len(got) == len(expected)
    for k, (a, b) in enumerate(zip(got, expected)):
        same(a, b, f"batch {k}")


def test_collate_outside_a_worker_is_default_collate():
    samples = [Numbered(4)[i] for i in range(4)]
    same(lmdbloader.collate(samples), default_collate(samples))


def test_collate_raises_what_default_collate_raises():
    bad = [torch.zeros(2), torch.zeros(3)]
    with pytest.raises(RuntimeError) as expected:
        list(DataLoader(Samples(bad), batch_size=2, num_workers=0))
    with pytest.raises(RuntimeError) as got:
        list(DataLoader(Samples(bad), batch_size=2, num_workers=1, collate_fn=lmdbloader.collate))
    assert str(expected.value).splitlines()[0] in str(got.value)


# ------------------------------------------------------- the records path

def test_dataloader_reads_records_into_the_ring(corpus):
    loader = lmdbloader.DataLoader(lmdbloader.LmdbDataset(corpus, decode="tensor"), batch_size=8, num_workers=2,
                                   shuffle=True)
    seen = []
    for batch in loader:
        assert batch.dtype == torch.uint8 and batch.shape == (8, RECORD)
        assert intact(batch)
        seen += rows(batch)
    assert sorted(seen) == list(range(RECORDS))
    s = loader.ring_stats()
    assert s["in_ring"] == RECORDS // 8 and s["fallback_full"] == 0, s
    rings = loader.dataset.stats()["batch_rings"]
    assert rings["attached_ring_bytes"] > 0 and rings["in_ring"] >= s["in_ring"], rings


def test_records_of_different_lengths_are_views_into_one_slot(ragged):
    ds = lmdbloader.LmdbDataset(ragged, decode="tensor")
    for workers in (0, 2):
        got = list(lmdbloader.DataLoader(ds, batch_size=5, num_workers=workers))
        flat = [t for b in got for t in b]
        # A batch whose records happen to share a length is a [B, L] tensor (the last one, of 1).
        assert all(isinstance(b, list) for b in got[:-1]) and got[-1].shape == (1, 4 * (1 + 95 % 7) * 100)
        assert [bytes(t.numpy()) for t in flat] == [record_bytes(i, 4 * (1 + i % 7) * 100) for i in range(RECORDS)]


def test_decode_tensor_under_default_collate_and_with_a_transform(corpus):
    ds = lmdbloader.LmdbDataset(corpus, decode="tensor")
    assert torch.equal(ds[3], torch.frombuffer(bytearray(record_bytes(3)), dtype=torch.uint8))
    batch = next(iter(DataLoader(ds, batch_size=4, num_workers=1)))
    assert intact(batch) and rows(batch) == [0, 1, 2, 3]
    pairs = lmdbloader.LmdbDataset(corpus, decode="tensor", transform=first_byte_and_record)
    got = next(iter(lmdbloader.DataLoader(pairs, batch_size=4, num_workers=1)))
    same(got, default_collate([pairs[i] for i in range(4)]))


def test_dataloader_batches_as_torchs_with_every_way_of_giving_its_arguments(corpus):
    """The same batches as torch's DataLoader: without automatic batching
    (batch_size=None: each sample as torch's default_convert leaves it), with a
    batch_sampler, with arguments given by position, with drop_last."""
    samples = Numbered(7, rows=2, cols=3)
    records = lmdbloader.LmdbDataset(corpus, decode="tensor")
    sampler = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(range(7)), 3, drop_last=False)
    for ds in (samples, records):
        for workers in (0, 2):
            for args, kwargs in [((), {"batch_size": None}),
                                 ((), {"batch_sampler": sampler}),
                                 ((4, False, None, None, workers), {}),
                                 ((), {"batch_size": 2, "drop_last": True})]:
                kw = dict(kwargs) if args else dict(kwargs, num_workers=workers)
                want = list(DataLoader(ds, *args, **kw))
                got = list(lmdbloader.DataLoader(ds, *args, **kw))
                assert len(got) == len(want), (args, kwargs)
                for k, (a, b) in enumerate(zip(got, want)):
                    same(a, b, f"{type(ds).__name__} {args} {kwargs} workers={workers} batch {k}")
    with pytest.raises(TypeError, match="no_such"):
        lmdbloader.DataLoader(samples, no_such=1)


# ------------------------------------------------------- lifetime

def test_kept_batches_stay_intact_across_epochs_aliases_and_processes(corpus):
    loader = lmdbloader.DataLoader(lmdbloader.LmdbDataset(corpus, decode="tensor"), batch_size=8, num_workers=2,
                                   shuffle=True, persistent_workers=True, collate_fn=lmdbloader.Collate(slots=2))
    first = list(loader)                       # a whole epoch kept
    alias = first[0].numpy()                   # a numpy alias, its tensor dropped
    alias_rows = rows(first[0])
    del first[0]
    for _ in range(2):                         # later epochs reuse whatever is free
        for batch in loader:
            assert intact(batch)
    assert all(intact(b) for b in first)
    assert rows(torch.from_numpy(alias)) == alias_rows and intact(torch.from_numpy(alias))
    # A kept batch sent to another process arrives whole.
    ctx = torch.multiprocessing.get_context("spawn")
    q = ctx.Queue()
    q.put(first[1])
    received = q.get(timeout=60)
    assert torch.equal(received, first[1])
    s = loader.ring_stats()
    assert s["fallback_full"] > 0 or s["worker_ring_bytes"] > 0, s


def test_a_forked_child_dropping_inherited_batches_frees_nothing_of_its_parents(corpus):
    """A child forked while the parent holds ring batches inherits their
    leases: when it drops them, the parent's slots must stay held, or the
    worker would refill them under the parent's batch. (The child leaves with
    os._exit: finalizing a fork of a process with live DataLoader iterators
    stops the parent's workers, torch's behaviour.)"""
    loader = lmdbloader.DataLoader(lmdbloader.LmdbDataset(corpus, decode="tensor"), batch_size=8, num_workers=1,
                                   persistent_workers=True, collate_fn=lmdbloader.Collate(slots=2))
    for _ in range(2):
        it = iter(loader)
        kept = [next(it), next(it)]
        saved = [b.clone() for b in kept]
        pid = os.fork()
        if pid == 0:  # the child drops what it inherited
            try:
                kept.clear()
                gc.collect()
            finally:
                os._exit(0)
        assert os.waitpid(pid, 0)[1] == 0
        for _ in it:  # more batches: freed slots would be refilled now
            pass
        assert all(torch.equal(a, b) for a, b in zip(kept, saved)), "a child's release freed the parent's slot"
        del kept
        gc.collect()


def test_a_ring_with_every_slot_held_falls_back_without_blocking(corpus):
    collate = lmdbloader.Collate(slots=1, max_ring_bytes=1)  # never grows
    loader = lmdbloader.DataLoader(lmdbloader.LmdbDataset(corpus, decode="tensor"), batch_size=8, num_workers=2,
                                   collate_fn=collate, timeout=60)
    kept = list(loader)                        # every slot held: the rest take the default path
    assert all(intact(b) for b in kept) and sorted(r for b in kept for r in rows(b)) == list(range(RECORDS))
    s = collate.stats()
    assert s["fallback_full"] > 0 and s["in_ring"] >= 2, s


def test_batches_that_outgrow_their_slot_are_whole_and_the_ring_grows_for_them():
    """And a batch whose later tensors do not fit takes the default path for those (counted)."""
    # Batch k holds tensors of 4,000 x (k + 1) bytes: each outgrows the slots sized from the first.
    samples = [torch.full((4000 * (i // 4 + 1),), i % 251, dtype=torch.uint8) for i in range(32)]
    collate = lmdbloader.Collate(slots=2, max_ring_bytes="64MiB")
    got = list(DataLoader(Samples(samples), batch_size=4, num_workers=1, collate_fn=collate))
    expected = list(DataLoader(Samples(samples), batch_size=4, num_workers=0))
    for k, (a, b) in enumerate(zip(got, expected)):
        same(a, b, f"batch {k}")
    pairs = [(torch.full((40,), i, dtype=torch.uint8), torch.full((4000 * (i // 4 + 1),), i % 251, dtype=torch.uint8))
             for i in range(32)]
    tight = lmdbloader.Collate(slots=6, max_ring_bytes=1)  # never grows
    expected_pairs = list(DataLoader(Samples(pairs), batch_size=4, num_workers=0))
    for k, batch in enumerate(DataLoader(Samples(pairs), batch_size=4, num_workers=1, collate_fn=tight)):
        same(batch, expected_pairs[k], f"pair batch {k}")  # dropped after: its slot is free again
    assert tight.stats()["fallback_oversize"] >= 1, tight.stats()
    s = collate.stats()
    # A batch's first tensor that does not fit any slot grows the ring before it is placed.
    assert max(w["rings"] for w in s["workers"].values()) >= 2 and s["in_ring"] == len(got), s


def test_a_batch_that_fails_in_a_new_ring_does_not_lose_the_rings_descriptor():
    # Batch 0 is kept (its slot held), so batch 1 grows a new ring; batch 1
    # fails after its first tensor is placed there. Batch 2 uses that ring and
    # must still reach the main process with its descriptor.
    good = [{"x": torch.full((1000,), i), "y": torch.zeros(3)} for i in range(2)]
    bad = [{"x": torch.full((1000,), 9), "y": torch.zeros(3)}, {"x": torch.full((1000,), 9), "y": torch.zeros(4)}]
    samples = good + bad + good
    loader = DataLoader(Samples(samples), batch_size=2, num_workers=1, collate_fn=lmdbloader.Collate(slots=1))
    it = iter(loader)
    kept = next(it)
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        next(it)
    same(next(it), default_collate(good))
    same(kept, default_collate(good))


def test_no_slot_stays_held_after_an_epoch_whose_batches_were_dropped(corpus):
    loader = lmdbloader.DataLoader(lmdbloader.LmdbDataset(corpus, decode="tensor"), batch_size=8, num_workers=2,
                                   persistent_workers=True)
    for _ in range(3):
        for batch in loader:
            pass
        del batch
        gc.collect()
        held = [r.held() for _, r in ring_main._attached.values()]
        assert held and sum(held) == 0, f"slots still held after the epoch: {held}"
    assert loader.ring_stats()["fallback_full"] == 0


# ------------------------------------------------------- processes

@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_every_start_method(corpus, method):
    ds = lmdbloader.LmdbDataset(corpus, decode="tensor")
    loader = lmdbloader.DataLoader(ds, batch_size=8, num_workers=2, multiprocessing_context=method)
    got = list(loader)
    assert all(intact(b) for b in got) and len(got) == RECORDS // 8
    general = DataLoader(Numbered(16), batch_size=4, num_workers=2, multiprocessing_context=method,
                         collate_fn=lmdbloader.collate)
    for k, batch in enumerate(general):
        same(batch, default_collate([Numbered(16)[i] for i in range(4 * k, 4 * k + 4)]))


def test_two_loaders_at_once(corpus, ragged):
    a = lmdbloader.DataLoader(lmdbloader.LmdbDataset(corpus, decode="tensor"), batch_size=8, num_workers=2)
    b = DataLoader(Numbered(RECORDS // 2), batch_size=4, num_workers=2, collate_fn=lmdbloader.collate)
    for k, (x, y) in enumerate(zip(a, b)):
        assert intact(x) and rows(x) == list(range(8 * k, 8 * k + 8))
        assert y["label"].tolist() == list(range(4 * k, 4 * k + 4))


def dev_shm():
    """What /dev/shm holds, but multiprocessing's named semaphores: spawn and
    forkserver contexts keep a sem.mp-* there by name until their resource
    tracker unlinks it, so any other Python job on the machine adds some
    (one beside this suite once made 14); the fork context these tests use
    unlinks its own at once."""
    return sorted(n for n in os.listdir("/dev/shm") if not n.startswith("sem.mp-"))


@pytest.mark.serial
def test_a_killed_worker_is_the_dataloaders_error_and_leaves_nothing(corpus):
    before = dev_shm()
    loader = lmdbloader.DataLoader(lmdbloader.LmdbDataset(corpus, decode="tensor"), batch_size=4, num_workers=2,
                                   timeout=30)
    it = iter(loader)
    next(it)
    # The DataLoader's SIGCHLD handler may raise as soon as the worker dies.
    with pytest.raises(RuntimeError, match="DataLoader worker"):
        os.kill(it._workers[0].pid, signal.SIGKILL)
        for _ in it:
            pass
    del it
    gc.collect()
    assert [n for n in dev_shm() if n not in before] == []


@pytest.mark.serial
def test_a_killed_main_process_leaves_no_worker_and_nothing_in_dev_shm(corpus, tmp_path):
    before = dev_shm()
    script = tmp_path / "main.py"
    script.write_text(textwrap.dedent(f"""
        import os, signal, lmdbloader
        loader = lmdbloader.DataLoader(lmdbloader.LmdbDataset({corpus!r}, decode="tensor"), batch_size=4,
                                       num_workers=2, persistent_workers=True)
        it = iter(loader)
        kept = [next(it), next(it)]
        print(" ".join(str(w.pid) for w in it._workers), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """))
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert res.returncode == -signal.SIGKILL, res.stderr
    workers = [int(p) for p in res.stdout.split()]
    assert len(workers) == 2
    deadline = time.time() + 30
    while time.time() < deadline and any(os.path.exists(f"/proc/{p}") for p in workers):
        time.sleep(0.1)
    assert not any(os.path.exists(f"/proc/{p}") for p in workers), "workers outlived their main process"
    assert [n for n in dev_shm() if n not in before] == []


def test_stateful_dataloader_resumes_exactly(corpus):
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    ds = lmdbloader.LmdbDataset(corpus, decode="tensor")

    def make():
        return stateful.StatefulDataLoader(ds, batch_size=8, num_workers=2, collate_fn=lmdbloader.collate,
                                           sampler=torch.utils.data.RandomSampler(
                                               ds, generator=torch.Generator().manual_seed(5)))

    whole = [r for b in make() for r in rows(b)]
    first = make()
    it = iter(first)
    head = [r for _, b in zip(range(5), it) for r in rows(b)]
    state = first.state_dict()
    del it, first
    resumed = make()
    resumed.load_state_dict(state)
    tail = [r for b in resumed for r in rows(b)]
    assert head + tail == whole


def test_pin_memory_copies_and_then_frees_the_slot(corpus):
    loader = lmdbloader.DataLoader(lmdbloader.LmdbDataset(corpus, decode="tensor"), batch_size=8, num_workers=2,
                                   pin_memory=True)
    with pytest.warns(UserWarning) if not torch.cuda.is_available() else _nothing():
        got = list(loader)
    assert all(intact(b) for b in got)
    if torch.cuda.is_available():
        assert all(b.is_pinned() for b in got)


def test_the_pin_threads_copy_is_made_before_the_slot_is_freed(corpus, monkeypatch):
    """With an accelerator, the DataLoader's pin thread unpickles each batch
    (building its tensors over the slot), copies it to pinned memory and drops
    it: the slot must stay held until that copy is made, be free after it,
    and the copies must be the records. CPU torch cannot pin, so the
    accelerator's calls are stood in for and "pinning" copies into fresh
    memory, in the pin thread, as Tensor.pin_memory does."""
    import threading
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *a, **k: torch.device("cuda"))
    monkeypatch.setattr(torch.accelerator, "current_device_index", lambda: 0)
    monkeypatch.setattr(torch.accelerator, "set_device_index", lambda i: None)
    copies = []

    def pin(self, *args, **kwargs):
        held = sum(r.held() for _, r in ring_main._attached.values())  # this batch's slot among them
        copies.append((threading.current_thread().name, held))
        return self.clone()

    monkeypatch.setattr(torch.Tensor, "pin_memory", pin)
    loader = lmdbloader.DataLoader(lmdbloader.LmdbDataset(corpus, decode="tensor"), batch_size=8, num_workers=2,
                                   pin_memory=True, persistent_workers=True)
    for _ in range(2):
        got = list(loader)
        assert len(got) == RECORDS // 8 and all(intact(b) for b in got)
        assert sorted(r for b in got for r in rows(b)) == list(range(RECORDS))
        gc.collect()
        held = [r.held() for _, r in ring_main._attached.values()]
        assert sum(held) == 0, f"slots held after the pinned copies: {held}"
    assert copies and all(name != threading.main_thread().name for name, _ in copies), copies[:3]
    assert all(held >= 1 for _, held in copies), "a slot was free while its batch was being copied"
    assert loader.ring_stats()["in_ring"] >= RECORDS // 8


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# ------------------------------------------------------- shared memory

def _unshare_available():
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


SMALL_SHM_SCRIPT = """
import sys, warnings, torch, lmdbloader
backing = sys.argv[2]
loader = lmdbloader.DataLoader(lmdbloader.LmdbDataset(sys.argv[1], decode="tensor"), batch_size=32, num_workers=2,
                               collate_fn=lmdbloader.Collate(backing=backing))
try:
    n = sum(len(b) for b in loader)
    print("read", n, loader.ring_stats()["in_ring"])
except Exception as e:
    print("error", type(e).__name__, str(e).replace("\\n", " "))
"""


@pytest.mark.skipif(not _unshare_available(), reason="needs unshare -m (root) to shrink /dev/shm")
def test_a_small_dev_shm_is_no_bus_error(corpus, tmp_path):
    script = tmp_path / "small_shm.py"
    script.write_text(SMALL_SHM_SCRIPT)

    def run(backing):
        cmd = f"mount -t tmpfs -o size=256k tmpfs /dev/shm && exec {sys.executable} {script} {corpus} {backing}"
        return subprocess.run(["unshare", "-m", "sh", "-c", cmd], capture_output=True, text=True, timeout=180)

    ring = run("memfd")  # the ring is a memfd: /dev/shm's size does not matter
    assert ring.returncode == 0 and ring.stdout.startswith(f"read {RECORDS} "), ring.stdout + ring.stderr
    shm = run("shm")     # a ring in /dev/shm that does not fit: a clear error at the first batch
    assert shm.returncode == 0 and shm.stdout.startswith("error OSError"), shm.stdout + shm.stderr
    assert "for the batch ring in /dev/shm" in shm.stdout and "No space left on device" in shm.stdout


def worker_status(pid):
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return {k: int(fields[k].split()[0]) << 10 for k in ("RssFile", "RssShmem")}


def test_a_workers_shared_memory_stays_within_the_rings_cap_by_the_kernels_count():
    # Batches of 8 x 64 KiB, every one kept: unbounded rings would hold 12 x 512 KiB per worker.
    samples = [torch.full((64 << 10,), i % 251, dtype=torch.uint8) for i in range(192)]
    cap = 1 << 20
    collate = lmdbloader.Collate(slots=1, slot_bytes="512KiB", max_ring_bytes=cap)
    loader = DataLoader(Samples(samples), batch_size=8, num_workers=2, collate_fn=collate)
    it = iter(loader)
    kept, peak = [], 0
    for batch in it:
        kept.append(batch)
        peak = max([peak] + [worker_status(w.pid)["RssShmem"] for w in it._workers])
    # The ring, plus one batch on torch's own path in flight, plus what else a worker maps shared.
    assert peak <= cap + (512 << 10) + (1 << 20), f"a worker held {peak} bytes of shared memory, the ring's cap {cap}"
    assert collate.stats()["fallback_full"] > 0  # what did not fit took the default path instead of growing
    for k, batch in enumerate(kept):
        assert torch.equal(batch, torch.stack(samples[8 * k:8 * k + 8]))


def meminfo_shmem():
    """The system's shared memory (/proc/meminfo Shmem), bytes: tmpfs, memfd and shm pages, whoever maps them."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Shmem:"):
                return int(line.split()[1]) << 10
    raise AssertionError("no Shmem line in /proc/meminfo")


class ShmemPeak:
    """The system's Shmem above what it was at the start, sampled every
    millisecond by a thread and at every call of sample() (each batch)."""

    def __init__(self):
        self.base = meminfo_shmem()
        self.peak = 0
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def sample(self):
        now = meminfo_shmem() - self.base
        self.peak = max(self.peak, now)
        return now

    def settled(self):
        """Shmem now, the least of a few readings over 50 ms: what stays, not
        another process's batch passing through."""
        readings = []
        for _ in range(6):
            readings.append(self.sample())
            time.sleep(0.01)
        return min(readings)

    def _run(self):
        while self.running:
            self.sample()
            time.sleep(0.001)

    def close(self):
        self.running = False
        self.thread.join()
        return self.peak


BIG_ROWS, BIG_COLS, BIG_BATCH = 1280, 1024, 4   # 5 MiB float32 samples, 20 MiB batches


def rings_held_by(stats):
    """Bytes the rings of a collate's workers hold (allocated blocks), counted
    in this process, whichever other rings it maps."""
    return sum(r.reserved_bytes for pid, r in ring_main._attached.values() if pid in stats["workers"])


def until_every_dispatched_batch_is_made(it, timeout=60):
    """Waits until the workers have made every batch the DataLoader has asked
    of them (its result queue holds them all): a consumer slower than its
    workers, the moment a loader holds the most, whichever path is faster."""
    deadline = time.monotonic() + timeout
    while it._worker_result_queue.qsize() < it._tasks_outstanding and time.monotonic() < deadline:
        time.sleep(0.002)


def shmem_of_a_loader(workers, persistent, make_collate, epochs=2):
    """Peak Shmem while a training-like loop runs, holding one batch while it
    asks for the next once every batch asked of the workers is made (each
    worker's prefetch_factor batches waiting); Shmem after each epoch once its
    last batch is dropped; the bytes the rings of this loader's workers hold
    then, by their own allocated blocks; and the collate_fn. Shmem is the
    whole system's: a run during which another process's shared memory came
    or went (Shmem after an epoch not what the rings hold, or not back where
    it started once the loader is gone) is run again."""
    for _ in range(5):
        collate_fn = make_collate()
        peak, after, rings, end = _shmem_of_one_run(workers, persistent, collate_fn, epochs)
        held = rings or [0] * epochs
        if abs(end) <= 4 << 20 and all(abs(a - h) <= 4 << 20 for a, h in zip(after, held)):
            break
    return peak, after, rings, collate_fn


def _shmem_of_one_run(workers, persistent, collate_fn, epochs):
    batches = 3 * workers + 2
    loader = DataLoader(Numbered(batches * BIG_BATCH, rows=BIG_ROWS, cols=BIG_COLS), batch_size=BIG_BATCH,
                        num_workers=workers, persistent_workers=persistent, collate_fn=collate_fn, timeout=120)
    gc.collect()
    shm = ShmemPeak()
    after, rings = [], []
    try:
        for _ in range(epochs):
            it = iter(loader)
            seen = 0
            while True:
                until_every_dispatched_batch_is_made(it)
                shm.sample()
                try:
                    batch = next(it)
                except StopIteration:
                    break
                assert batch["x"].shape == (BIG_BATCH, BIG_ROWS, BIG_COLS)
                assert batch["label"].tolist() == list(range(seen, seen + BIG_BATCH))
                seen += BIG_BATCH
            assert seen == batches * BIG_BATCH
            del batch, it
            gc.collect()
            after.append(shm.settled())
            if collate_fn is not None:
                rings.append(rings_held_by(collate_fn.stats()))
        del loader  # persistent workers exit
        gc.collect()
        end = shm.settled()
    finally:
        peak = shm.close()
    return peak, after, rings, end


@pytest.mark.serial
@pytest.mark.parametrize("workers", [2, 4, 8])
def test_rings_hold_at_most_the_default_paths_peak_plus_a_slot_per_worker(workers):
    """The rings' shared memory, as the kernel counts it system-wide, against
    torch's default path measured the same way in the same test: within its
    peak plus one slot per worker at every moment, persistent workers or not;
    workers that exit give back what their rings held once the batches are
    dropped. (Reserving every slot up front, prefetch_factor x workers + 2
    slots a worker, held 15 batches with 2 workers where this bound is 7.)"""
    mib = 1 << 20
    batch_bytes = BIG_BATCH * BIG_ROWS * BIG_COLS * 4
    slot = ring_worker._slot_size(batch_bytes)
    for persistent in (True, False):
        default_peak, default_after, _, _ = shmem_of_a_loader(workers, persistent, lambda: None)
        ring_peak, ring_after, rings_after, collate = shmem_of_a_loader(workers, persistent, lmdbloader.Collate)
        bound = default_peak + workers * slot
        figures = (f"{workers} workers, persistent={persistent}, batches of {batch_bytes / mib:.0f} MiB: "
                   f"default path peak {default_peak / mib:.0f} MiB, after each epoch "
                   f"{[round(a / mib) for a in default_after]}; rings peak {ring_peak / mib:.0f} MiB, after each "
                   f"epoch {[round(a / mib) for a in ring_after]} (by their own blocks "
                   f"{[round(a / mib) for a in rings_after]}); bound {bound / mib:.0f} MiB")
        print(figures)
        assert default_peak >= 2 * workers * batch_bytes, f"the default path's queues did not fill: {figures}"
        assert ring_peak <= bound, figures
        stats = collate.stats()
        assert stats["in_ring"] == stats["batches"] == 2 * (3 * workers + 2), stats
        if persistent:
            assert all(a <= bound for a in ring_after), figures
            # The same bound by the rings' own allocated blocks (no other process's memory in them).
            assert all(a <= bound for a in rings_after), figures
        else:
            assert all(a <= batch_bytes // 2 for a in ring_after), f"exited workers' rings kept memory: {figures}"
            assert all(a <= workers * 4096 for a in rings_after), figures  # each ring's header page


def test_a_consumer_that_keeps_batches_grows_the_ring_and_gets_the_memory_back_when_it_drops_them():
    """Kept batches grow a worker's rings (up to max_ring_bytes); once they are
    dropped, the grown ring's slots give their memory back at the worker's next
    batch, by the rings' own allocated blocks."""
    samples = [torch.full((64 << 10,), i % 251, dtype=torch.uint8) for i in range(96)]   # 512 KiB batches
    collate = lmdbloader.Collate()
    loader = DataLoader(Samples(samples), batch_size=8, num_workers=1, persistent_workers=True, collate_fn=collate)
    kept = list(loader)
    grown = collate.stats()
    assert max(w["rings"] for w in grown["workers"].values()) == 2 and grown["fallback_full"] > 0, grown
    for k, batch in enumerate(kept):
        assert torch.equal(batch, torch.stack(samples[8 * k:8 * k + 8])), f"kept batch {k}"
    held = rings_held_by(grown)
    del kept, batch
    gc.collect()
    for _ in loader:  # dropped as it goes
        pass
    after = rings_held_by(collate.stats())
    slot = 512 << 10
    assert after <= 2 * 4096 + 4 * slot < held, (held, after)


# --------------------------------------- epochs cut short, loaders deleted

def _settle_shmem(base):
    """Shmem above `base` once it stops moving: the least of a few readings
    over 50 ms (another process's batch passing through is not kept)."""
    readings = []
    for _ in range(6):
        readings.append(meminfo_shmem() - base)
        time.sleep(0.01)
    return min(readings)


def _cut_short(it, received):
    """Receives `received` batches, waits until the workers have made every
    batch the DataLoader asked of them (prefetch_factor a worker, waiting in
    its queue: what a `break` leaves unreceived, at its most), then breaks."""
    for k, batch in enumerate(it):
        if k + 1 == received:
            until_every_dispatched_batch_is_made(it)
            break
    return batch


def _epochs_cut_short_run_out_and_deleted(loader, workers, collate_fn):
    """Shmem above the start, and the bytes the rings of `collate_fn` hold by
    their own blocks (None for torch's default path), at three moments:
    after an epoch ended by `break` once every worker's ring has reached this
    process and every batch asked of the workers is made, after an epoch run
    to the end, and after the loader was deleted in the middle of an epoch.
    The loop drops its last batch each time, as the next epoch would."""
    gc.collect()
    base = meminfo_shmem()
    seen = {}
    received = workers + 1  # round robin: a batch from every worker, so every ring is attached here
    for moment in ("cut short", "run out", "deleted"):
        it = iter(loader)
        if moment == "run out":
            for batch in it:
                pass
        else:
            batch = _cut_short(it, received)
        if moment == "deleted":
            del loader
        del it, batch  # the loop's iterator goes with the loop: torch shuts its workers down
        gc.collect()
        seen[moment] = (_settle_shmem(base),
                        None if collate_fn is None else rings_held_by(collate_fn.stats()))
    return seen


def _measured_against_the_default_path(make_loader, workers, bound):
    """(default path's readings, rings' readings, collate) of
    _epochs_cut_short_run_out_and_deleted, the default path first. Shmem is
    the whole system's, and other processes' shared memory comes and goes: a
    run where the default path's Shmem did not come back to where it started
    (torch's segments go with the batches and the workers), or the rings'
    went past `bound` over the default path's, is run again (the rings' own
    blocks, which no other process moves, are checked apart)."""
    for _ in range(4):
        default = _epochs_cut_short_run_out_and_deleted(make_loader(None), workers, None)
        collate = lmdbloader.Collate()
        rings = _epochs_cut_short_run_out_and_deleted(make_loader(collate), workers, collate)
        if all(abs(shm) <= 2 << 20 for shm, _ in default.values()) and \
                all(shm <= default[m][0] + bound for m, (shm, _) in rings.items()):
            break
    return default, rings, collate


@pytest.mark.serial
@pytest.mark.parametrize("workers", [2, 4, 8])
def test_rings_of_an_epoch_cut_short_or_a_deleted_loader_give_their_memory_back(workers):
    """Non-persistent workers, epochs ended by `break` (the batches the
    DataLoader prefetched are never received), run to the end, and the loader
    deleted mid-epoch: after each, the rings' Shmem (/proc/meminfo) is within
    the default path's, measured the same way in the same test, plus one slot
    per worker, and the rings hold nothing but their header pages by their own
    blocks. (Freeing an unreceived batch's slot only when the next epoch's
    workers sent a ring held 2 x workers batches here until then.)"""
    mib = 1 << 20
    rows, cols = (512, 512) if workers == 2 else (512, 256) if workers == 4 else (256, 256)
    batch_bytes = BIG_BATCH * rows * cols * 4  # 8 MiB prefetched in all, whatever the workers
    slot = ring_worker._slot_size(batch_bytes)

    def make_loader(collate_fn):
        return DataLoader(Numbered((3 * workers + 2) * BIG_BATCH, rows=rows, cols=cols), batch_size=BIG_BATCH,
                          num_workers=workers, collate_fn=collate_fn, timeout=120)

    default, rings, collate = _measured_against_the_default_path(make_loader, workers, workers * slot)
    figures = (f"{workers} workers, batches of {batch_bytes / mib:.0f} MiB, Shmem above the start in MiB after "
               f"each of {list(default)}: default path {[round(s / mib, 1) for s, _ in default.values()]}, "
               f"rings {[round(s / mib, 1) for s, _ in rings.values()]}, by the rings' own blocks "
               f"{[round(r / mib, 2) for _, r in rings.values()]}")
    print(figures)
    for moment, (shm, held) in rings.items():
        assert shm <= default[moment][0] + workers * slot, f"{moment}: {figures}"
        assert held <= workers * lmdbloader._core.BatchRing.HEADER_BYTES, f"{moment}: {figures}"
    stats = collate.stats()
    assert stats["in_ring"] == stats["batches"] and stats["fallback_full"] == 0, stats


def test_a_worker_that_runs_out_first_exits_with_every_batch_of_it_received_intact():
    """An IterableDataset whose first worker runs out early: torch tells that
    worker to exit (retiring its ring) only after it read the worker's last
    batch, so none of its batches is freed unreceived; the kept ones stay
    intact after it exited, and equal default_collate's."""
    lengths, batch = [2 * 4, 8 * 4], 4
    loader = DataLoader(Uneven(lengths), batch_size=batch, num_workers=2, collate_fn=lmdbloader.Collate(), timeout=60)
    it = iter(loader)
    kept = [next(it) for _ in range(6)]  # worker 0's two batches and four of worker 1's, alternating
    it._workers[0].join(timeout=30)
    assert it._workers[0].exitcode == 0, "the worker that ran out did not exit"
    kept += list(it)
    expected = []
    for k, n in enumerate(lengths):
        samples = [{"x": torch.full((4096,), float(i)), "label": i} for i in range(1000 * k, 1000 * k + n)]
        expected += [default_collate(samples[j:j + batch]) for j in range(0, n, batch)]
    assert sorted(int(b["label"][0]) for b in kept) == sorted(int(b["label"][0]) for b in expected)
    by_first = {int(b["label"][0]): b for b in expected}
    for b in kept:
        same(b, by_first[int(b["label"][0])])

def test_a_batch_received_after_its_ring_was_retired_is_an_error_not_zeros():
    """A batch that a worker's exit freed (never claimed) cannot be built
    afterwards: its slot's bytes are no longer the batch's."""
    ring = lmdbloader._core.BatchRing.create(2, 4096)
    slot, generation = ring.acquire()
    ring.reserve(slot, 4096)
    memoryview(ring).cast("B")[ring.slot_offset(slot)] = 7
    ring_main._attached["retired-test"] = (os.getpid(), ring)
    try:
        ring.retire()  # what the worker does as it exits
        assert ring.generation(slot) == 0 and ring.reserved_bytes == 4096
        with pytest.raises(RuntimeError, match="arrived after the worker gave up its ring"):
            ring_main.rebuild_tensor("retired-test", None, os.getpid(), slot, generation, 0, torch.uint8, (4,))
    finally:
        del ring_main._attached["retired-test"]

def _jpeg_corpus(path, records):
    from PIL import Image
    buf = io.BytesIO()
    Image.fromarray(np.arange(96 * 128 * 3, dtype=np.uint8).reshape(96, 128, 3)).save(buf, format="JPEG")
    with lmdbloader.CorpusWriter(path) as w:
        for i in range(records):
            w.add(f"r{i}", {"image": buf.getvalue(), "label": i}, label=i)
    return path


@pytest.mark.serial
@pytest.mark.parametrize("decode", ["tensor", "image"])
def test_a_deleted_loader_with_persistent_workers_gives_back_what_its_rings_held(corpus, tmp_path, decode):
    """lmdbloader.DataLoader with persistent workers, records read or images
    decoded straight into the slot: an epoch run out, one cut short (its
    prefetched batches stay with the live workers, as torch's own do), then
    the loader deleted mid-epoch: its rings hold nothing but their header
    pages, and the system's Shmem is back within one slot per worker."""
    workers = 2
    if decode == "tensor":
        ds = lmdbloader.LmdbDataset(corpus, decode="tensor")
        batch_bytes = 8 * RECORD
    else:
        pytest.importorskip("PIL")
        ds = lmdbloader.LmdbDataset(_jpeg_corpus(str(tmp_path / "jpeg"), 48), decode=lmdbloader.ImageDecode(64))
        batch_bytes = 8 * 3 * 64 * 64 * 4
    slot = ring_worker._slot_size(batch_bytes)
    for _ in range(4):  # run again while another process's shared memory moves the system's count
        gc.collect()
        base = meminfo_shmem()
        loader = lmdbloader.DataLoader(ds, batch_size=8, num_workers=workers, persistent_workers=True, timeout=120)
        collate = loader.collate_fn
        for batch in loader:
            pass
        batch = _cut_short(iter(loader), workers + 1)
        del batch
        it = iter(loader)
        batch = _cut_short(it, workers + 1)
        assert collate.stats()["in_ring"] == collate.stats()["batches"], collate.stats()
        del loader, it, batch  # the loader held the workers' iterator: it goes, its workers exit
        gc.collect()
        shm, held = _settle_shmem(base), rings_held_by(collate.stats())
        if shm <= workers * slot:
            break
    assert held <= workers * lmdbloader._core.BatchRing.HEADER_BYTES, (decode, held)
    assert shm <= workers * slot, f"{decode}: Shmem {shm} bytes above the start after the loader went"


def test_memory_short_for_a_slot_is_an_oserror_at_that_batch_naming_the_backing():
    """Later slots are reserved as batches first need them: memory the backing
    cannot give then is an OSError at that batch (never SIGBUS), and the slot
    is not left taken."""
    rings = ring_worker._WorkerRings(lmdbloader.Collate(slots=2, slot_bytes="1TiB", backing="shm"), None)
    rings.first_segment(8192)
    seg, slot, generation = rings.acquire(8192)
    assert seg.ring.reserved_bytes == 4096 + 8192
    with pytest.raises(OSError) as e:
        rings.acquire(1 << 40)  # more than /dev/shm holds
    assert e.value.errno == errno.ENOSPC, e.value
    assert "for the batch ring in /dev/shm" in str(e.value) and "lmdbloader.collate" in str(e.value), e.value
    assert seg.ring.held() == 1 and seg.ring.reserved_bytes == 4096 + 8192


def test_lmdbloader_memory_reports_a_rings_pages_as_shared_memory():
    from lmdbloader.memory import process_memory
    # Rings an earlier test of this process left to the collector would go
    # in the middle and take their pages off the growth (seen: 12 KiB short).
    gc.collect()
    before = process_memory()["shmem_rss"]
    ring = lmdbloader._core.BatchRing.create(2, 4 << 20)
    view = memoryview(ring).cast("B")
    for at in range(0, len(view), 4096):  # touch every page of both slots
        view[at] = 1
    grew = process_memory()["shmem_rss"] - before
    assert grew >= 8 << 20, f"shmem_rss grew {grew} bytes for 8 MiB of touched ring"
    del view, ring


def test_worker_file_memory_stays_under_the_budget_by_the_kernels_count(corpus):
    budget = 4 << 20
    loader = lmdbloader.DataLoader(lmdbloader.LmdbDataset(corpus, decode="tensor", rss_budget=budget),
                                   batch_size=8, num_workers=2, persistent_workers=True)
    baseline = worker_status(os.getpid())["RssFile"]  # the shared libraries every process maps
    peak = 0
    for _ in range(2):
        it = iter(loader)
        for batch in it:
            peak = max([peak] + [worker_status(w.pid)["RssFile"] for w in it._workers])
    assert peak <= baseline + budget, (peak, baseline)


def test_bad_options_are_clear_errors():
    for kwargs, message in [({"slots": 0}, "slots must be an integer from 1 to 500"),
                            ({"slots": 1.5}, "slots must be an integer"),
                            ({"slot_bytes": "lots"}, "slot_bytes"),
                            ({"slot_bytes": 0}, "slot_bytes must be positive"),
                            ({"max_ring_bytes": -1}, "max_ring_bytes"),
                            ({"backing": "tmp"}, "backing must be one of auto, memfd, shm"),
                            ({"prefetch_factor": 0}, "prefetch_factor must be a positive integer")]:
        with pytest.raises(ValueError, match=message):
            lmdbloader.Collate(**kwargs)
    with pytest.raises(TypeError):
        lmdbloader.Collate(slotz=3)
    with pytest.raises(ValueError, match="decode must be 'msgpack', 'raw', 'tensor' or a callable"):
        lmdbloader.LmdbDataset("/nonexistent", decode="tensors")


class _PendingLooking(list):
    """A user's batch type that happens to have a ``pending`` attribute."""
    pending = True


class _PendingLookingDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.full((3,), float(i))

    def __getitems__(self, indices):
        return _PendingLooking(self[i] for i in indices)


def test_a_batch_that_only_looks_deferred_is_collated_as_given():
    # Only lmdbloader's own deferred batches are read into a slot; any other
    # batch goes through collation, as default_collate takes it.
    loader = DataLoader(_PendingLookingDataset(), batch_size=4, num_workers=1, collate_fn=lmdbloader.collate)
    got = [b.clone() for b in loader]
    expected = [default_collate([torch.full((3,), float(i)) for i in range(k, k + 4)]) for k in (0, 4)]
    assert len(got) == 2 and all(torch.equal(g, e) for g, e in zip(got, expected))
