"""The DataLoader budget: persistent workers stay under the budget for
three epochs, while the same job over py-lmdb grows."""

import functools
import multiprocessing
import os
import zlib

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

import lmdbloader  # noqa: E402
from lmdbloader.memory import children, process_memory  # noqa: E402

from conftest import MiB, frame_bytes, statm_rss, warm_page_cache  # noqa: E402
from pylmdb_baseline import PyLmdbDataset  # noqa: E402

BUDGET = 16 * MiB
SLACK = 32 * MiB  # batches in flight


def summarize(record):
    """Reduce a record to what the main process can check (and cheap to send)."""
    return record["label"], record["name"], zlib.crc32(b"".join(record["frames"]))


def expected(name, frames=8, size=32 * 1024):
    video = int(name.rsplit("_", 1)[1])
    return zlib.crc32(b"".join(frame_bytes(video, f, size) for f in range(frames)))


def record_start_rss(folder, worker_id):
    with open(os.path.join(folder, str(os.getpid())), "w") as f:
        f.write(str(statm_rss()))


def tree_rss(pid):
    return sum(process_memory(p)["rss"] for p in [pid] + children(pid))


def run_epochs(dataset, tmp_path, epochs=3):
    """Runs the job; returns (per-worker peak growth, tree RSS after each epoch, bad records)."""
    starts = tmp_path / "starts"
    starts.mkdir(parents=True)
    loader = DataLoader(dataset, batch_size=16, shuffle=True, num_workers=2, persistent_workers=True,
                        collate_fn=lambda batch: batch,
                        worker_init_fn=functools.partial(record_start_rss, str(starts)))
    peak = {}
    tree_after = []
    bad = 0
    me = os.getpid()
    for _ in range(epochs):
        for n, batch in enumerate(loader):
            bad += sum(crc != expected(name) for _, name, crc in batch)
            if n % 4 == 0:  # sample every worker's RSS as the kernel counts it
                for pid in children(me):
                    try:
                        peak[pid] = max(peak.get(pid, 0), statm_rss(pid))
                    except (FileNotFoundError, ProcessLookupError):
                        pass
        tree_after.append(tree_rss(me))
    growth = {}
    for name in os.listdir(starts):
        pid = int(name)
        growth[pid] = peak.get(pid, 0) - int((starts / name).read_text())
    del loader
    return growth, tree_after, bad


def test_lmdbloader_workers_stay_under_budget_while_pylmdb_grows(video_corpus, tmp_path):
    warm_page_cache(os.path.join(video_corpus, "data.mdb"))
    ds = lmdbloader.LmdbDataset(video_corpus, rss_budget=BUDGET, transform=summarize)
    growth, tree, bad = run_epochs(ds, tmp_path / "ours")
    assert bad == 0
    assert len(growth) == 2
    for pid, g in growth.items():
        assert g <= BUDGET + SLACK, f"worker {pid} grew {g / MiB:.1f} MiB (budget {BUDGET / MiB} + {SLACK / MiB})"
    assert abs(tree[2] - tree[0]) <= 16 * MiB, f"tree RSS after epochs: {[t / MiB for t in tree]}"

    pytest.importorskip("lmdb")
    warm_page_cache(os.path.join(video_corpus, "data.mdb"))
    baseline = PyLmdbDataset(video_corpus, transform=summarize)
    base_growth, _, base_bad = run_epochs(baseline, tmp_path / "pylmdb", epochs=1)
    assert base_bad == 0
    # Each py-lmdb worker maps what it touched: far past the bound.
    assert max(base_growth.values()) > 2 * (BUDGET + SLACK), \
        f"py-lmdb workers grew only {[g / MiB for g in base_growth.values()]} MiB"


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_every_start_method_returns_correct_data(video_corpus, method):
    ds = lmdbloader.LmdbDataset(video_corpus, rss_budget="64MiB", transform=summarize)
    loader = DataLoader(ds, batch_size=32, num_workers=2, collate_fn=_identity,
                        multiprocessing_context=multiprocessing.get_context(method))
    seen = set()
    for batch in loader:
        for _, name, crc in batch:
            assert crc == expected(name)
            seen.add(name)
    assert len(seen) == len(ds)


def _identity(batch):
    return batch
