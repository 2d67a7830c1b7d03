"""Tensor batches in DataLoader workers: py-lmdb + default_collate against
lmdbloader's dataset, its ring collate and its DataLoader, in one run.

The job users run: a plain ``torch.utils.data.DataLoader`` (2 persistent
workers, shuffled, 3 epochs) whose samples are tensors collated into batches
in the workers, the main process touching every 4 KiB page of each batch (as
a copy to a device does). Three shapes:
- ``256k``: 2,048 records of 256 KiB, each a uint8 tensor, batch 32;
- ``2k``: 32,768 records of 2 KiB plus an int label, batch 256;
- ``jpeg``: 2,048 JPEG images (256x256) decoded with PIL in the workers to
  [3, 224, 224] uint8 tensors, batch 32 (decoding dominates there).
Variants per shape: py-lmdb + default_collate; LmdbDataset + default_collate;
LmdbDataset + lmdbloader.collate (a plain DataLoader); lmdbloader.DataLoader;
LitData's StreamingDataset + StreamingDataLoader where LitData is installed
(the same records, written by litdata.optimize in 64 MB chunks). Variants alternate, ``--repeats`` rounds; the figures
are medians of epochs 2-3 (page cache warm), with ratios to py-lmdb taken
within each round. Also reported: each process's peak RSS and PSS, and the
peak of /dev/shm in use.

    python bench/collate_bench.py [--shapes 256k,2k,jpeg] [--repeats 3] [--out bench/out]
"""

import argparse
import gc
import io
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import warnings

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

import lmdbloader
from lmdbloader.memory import Sampler

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
from conftest import warm_page_cache  # noqa: E402

sys.path.insert(0, HERE)
from batch_probes import dev_shm_used, touch  # noqa: E402

warnings.filterwarnings("ignore", message="The given buffer is not writable")


# ------------------------------------------------------------ the datasets

class PyLmdbTensors(Dataset):
    """What users write today: py-lmdb opened lazily in each worker, a tensor per record."""

    def __init__(self, path, decode):
        self.path, self.decode, self.env = path, decode, None
        import lmdb
        with lmdb.open(path, readonly=True, lock=False) as env, env.begin() as txn:
            self.n = json.loads(txn.get(b"__lmdbloader__/manifest"))["records"]

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.env is None:
            import lmdb
            self.env = lmdb.open(self.path, readonly=True, lock=False, readahead=False)
        with self.env.begin(buffers=True) as txn:
            return self.decode(bytes(txn.get(i.to_bytes(8, "big"))), i)

    def __getstate__(self):
        return {"path": self.path, "decode": self.decode, "env": None, "n": self.n}


def raw_tensor(b, i):
    return torch.frombuffer(bytearray(b), dtype=torch.uint8)


def labelled(b, i):
    return torch.frombuffer(bytearray(b), dtype=torch.uint8), i % 1000


def jpeg_tensor(b, i=None):
    from PIL import Image
    img = Image.open(io.BytesIO(b)).convert("RGB").resize((224, 224))
    return torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1)


class LabelledRecords(Dataset):
    """LmdbDataset records with the label column: (tensor, label)."""

    def __init__(self, ds):
        self.ds, self.labels = ds, None

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        return self.__getitems__([i])[0]

    def __getitems__(self, indices):
        if self.labels is None:
            self.labels = self.ds.column("label")
        records = self.ds.__getitems__(indices)
        return [(t, int(self.labels[i])) for t, i in zip(records, indices)]


SHAPES = {
    "256k": dict(records=2048, size=256 << 10, batch=32),
    "2k": dict(records=32768, size=2 << 10, batch=256),
    "jpeg": dict(records=2048, size=None, batch=32),
}


def write_corpus(shape, root):
    spec = SHAPES[shape]
    path = os.path.join(root, shape)
    rng = np.random.default_rng(1)
    if shape == "jpeg":
        from PIL import Image
        base = rng.integers(0, 255, size=(256, 256, 3), dtype=np.uint8)
    with lmdbloader.CorpusWriter(path) as w:
        for i in range(spec["records"]):
            if shape == "jpeg":
                buf = io.BytesIO()
                Image.fromarray(np.roll(base, i, axis=0)).save(buf, format="JPEG", quality=90)
                record = buf.getvalue()
            else:
                record = rng.integers(0, 255, size=spec["size"], dtype=np.uint8).tobytes()
            w.add(f"r{i}", record, label=i % 1000)
    return path


def variants(shape, path):
    out = {}
    if shape == "256k":
        out["py-lmdb + default_collate"] = lambda: (PyLmdbTensors(path, raw_tensor), {})
        out["LmdbDataset + default_collate"] = lambda: (lmdbloader.LmdbDataset(path, decode="tensor"), {})
        out["LmdbDataset + lmdbloader.collate"] = lambda: (
            lmdbloader.LmdbDataset(path, decode=lambda b: torch.frombuffer(b, dtype=torch.uint8)),
            {"collate_fn": lmdbloader.collate})
        out["lmdbloader.DataLoader"] = lambda: (lmdbloader.LmdbDataset(path, decode="tensor"), {"loader": True})
    elif shape == "2k":
        out["py-lmdb + default_collate"] = lambda: (PyLmdbTensors(path, labelled), {})
        out["LmdbDataset + default_collate"] = lambda: (LabelledRecords(lmdbloader.LmdbDataset(path, decode="tensor")), {})
        out["LmdbDataset + lmdbloader.collate"] = lambda: (
            LabelledRecords(lmdbloader.LmdbDataset(path, decode="tensor")), {"collate_fn": lmdbloader.collate})
        out["lmdbloader.DataLoader"] = lambda: (LabelledRecords(lmdbloader.LmdbDataset(path, decode="tensor")),
                                                {"loader": True})
    else:
        out["py-lmdb + default_collate"] = lambda: (PyLmdbTensors(path, lambda b, i: jpeg_tensor(b)), {})
        out["LmdbDataset + default_collate"] = lambda: (lmdbloader.LmdbDataset(path, decode="raw", transform=jpeg_tensor), {})
        out["LmdbDataset + lmdbloader.collate"] = lambda: (
            lmdbloader.LmdbDataset(path, decode="raw", transform=jpeg_tensor), {"collate_fn": lmdbloader.collate})
        out["lmdbloader.DataLoader"] = lambda: (lmdbloader.LmdbDataset(path, decode="raw", transform=jpeg_tensor),
                                                {"loader": True})
    lit = os.path.join(os.path.dirname(path), shape + ".litdata")
    if os.path.isdir(lit):  # written by write_litdata where LitData is installed
        transform = {"256k": None, "2k": None, "jpeg": jpeg_tensor}[shape]
        out["LitData StreamingDataLoader"] = lambda: (litdata_dataset(lit, transform), {"loader": "litdata"})
    return out


# ------------------------------------------------------------ LitData, where installed

_litdata_source = {}


def litdata_record(i, path, shape):
    """LitData's item i: what each lmdbloader variant's dataset returns (the
    JPEG's bytes for the jpeg shape, decoded by the dataset's transform)."""
    r = _litdata_source.get(path)
    if r is None:
        r = _litdata_source[path] = lmdbloader.Reader(path)
    b = r[i]
    if shape == "2k":
        return raw_tensor(b, i), i % 1000
    return b if shape == "jpeg" else raw_tensor(b, i)


def write_litdata(shape, path):
    """The corpus again in LitData's format (litdata.optimize, 64 MB chunks);
    False where LitData is not installed."""
    try:
        import functools
        import litdata
    except ImportError:
        return False
    import multiprocessing
    out = os.path.join(os.path.dirname(path), shape + ".litdata")
    n = len(lmdbloader.Reader(path))
    method = multiprocessing.get_start_method(allow_none=True)
    litdata.optimize(fn=functools.partial(litdata_record, path=path, shape=shape), inputs=list(range(n)),
                     output_dir=out, chunk_bytes="64MB", num_workers=2)
    # optimize sets the process's start method to spawn: every loader here forks, as by default.
    multiprocessing.set_start_method(method, force=True)
    return True


def litdata_dataset(lit, transform):
    import litdata
    return litdata.StreamingDataset(lit, shuffle=True, transform=transform)


# ------------------------------------------------------------ measuring



def stop_workers(timeout=30):
    """Collects the loader (a cycle may hold its iterator, and a later fork
    would inherit it) and waits for its workers to leave, so that no run's
    workers are sampled in the next."""
    import psutil
    gc.collect()
    deadline = time.time() + timeout
    while time.time() < deadline:
        left = []
        for c in psutil.Process().children():
            try:  # multiprocessing's resource tracker stays for the process's life
                if c.status() != psutil.STATUS_ZOMBIE and "resource_tracker" not in " ".join(c.cmdline()):
                    left.append(c)
            except psutil.NoSuchProcess:
                pass
        if not left:
            return
        time.sleep(0.05)


def run(make, batch, epochs, workers):
    dataset, opts = make()
    kind = opts.pop("loader", None)
    if kind == "litdata":  # shuffled by its dataset
        import litdata
        loader = litdata.StreamingDataLoader(dataset, batch_size=batch, num_workers=workers, persistent_workers=True)
    else:
        loader_cls = lmdbloader.DataLoader if kind else DataLoader
        loader = loader_cls(dataset, batch_size=batch, shuffle=True, num_workers=workers, persistent_workers=True,
                            **opts)
    shm_base, shm_peak = dev_shm_used(), 0
    stop = threading.Event()

    def watch_shm():
        nonlocal shm_peak
        while not stop.is_set():
            shm_peak = max(shm_peak, dev_shm_used() - shm_base)
            stop.wait(0.02)

    watcher = threading.Thread(target=watch_shm, daemon=True)
    watcher.start()
    sampler = Sampler(interval=0.25).start()  # sparse: reading smaps_rollup costs CPU the job shares
    seconds = []
    n = 0
    for _ in range(epochs):
        t = time.perf_counter()
        for b in loader:
            touch(b)
            n += batch
        seconds.append(time.perf_counter() - t)
    samples = sampler.stop()
    stop.set()
    watcher.join()
    ring = loader.ring_stats() if isinstance(loader, lmdbloader.DataLoader) else (
        lmdbloader.collate.stats() if opts.get("collate_fn") is lmdbloader.collate else {})
    del loader
    stop_workers()
    per_epoch = len(dataset) // batch * batch
    steady = per_epoch * (epochs - 1) / sum(seconds[1:])
    peaks = {}
    for s in samples:
        key = "main" if s["pid"] == os.getpid() else f"worker {s['pid']}"
        p = peaks.setdefault(key, {"rss_mib": 0, "pss_mib": 0})
        p["rss_mib"] = max(p["rss_mib"], s["rss"] / 2**20)
        p["pss_mib"] = max(p["pss_mib"], s["pss"] / 2**20)
    workers_peaks = [v for k, v in peaks.items() if k != "main"]
    return {"records_per_s": steady, "epoch_seconds": seconds,
            "main_peak": peaks.get("main"),
            "worker_peak_rss_mib": max((v["rss_mib"] for v in workers_peaks), default=0),
            "worker_peak_pss_mib": max((v["pss_mib"] for v in workers_peaks), default=0),
            "dev_shm_peak_mib": shm_peak / 2**20,
            "ring": {k: v for k, v in ring.items() if k != "workers"}}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="256k,2k,jpeg")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=os.path.join(HERE, "out"))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    report = {"torch": torch.__version__, "workers": args.workers, "epochs": args.epochs, "shapes": {}}
    with tempfile.TemporaryDirectory(dir=args.out) as tmp:
        for shape in args.shapes.split(","):
            spec = SHAPES[shape]
            path = write_corpus(shape, tmp)
            write_litdata(shape, path)
            runs = {name: [] for name in variants(shape, path)}
            for _ in range(args.repeats):
                for name, make in variants(shape, path).items():
                    warm_page_cache(os.path.join(path, "data.mdb"))
                    res = run(make, spec["batch"], args.epochs, args.workers)
                    runs[name].append(res)
                    print(f"{shape:5s} {name:34s} {res['records_per_s']:9.0f} records/s  worker RSS/PSS "
                          f"{res['worker_peak_rss_mib']:.0f}/{res['worker_peak_pss_mib']:.0f} MiB  main RSS/PSS "
                          f"{res['main_peak']['rss_mib']:.0f}/{res['main_peak']['pss_mib']:.0f} MiB  "
                          f"/dev/shm peak {res['dev_shm_peak_mib']:.1f} MiB", flush=True)
            base = runs["py-lmdb + default_collate"]
            table = {}
            for name, rs in runs.items():
                table[name] = {
                    "records_per_s": statistics.median(r["records_per_s"] for r in rs),
                    "ratio_to_pylmdb": statistics.median(r["records_per_s"] / b["records_per_s"]
                                                         for r, b in zip(rs, base)),
                    "worker_peak_rss_mib": statistics.median(r["worker_peak_rss_mib"] for r in rs),
                    "worker_peak_pss_mib": statistics.median(r["worker_peak_pss_mib"] for r in rs),
                    "main_peak_rss_mib": statistics.median(r["main_peak"]["rss_mib"] for r in rs),
                    "main_peak_pss_mib": statistics.median(r["main_peak"]["pss_mib"] for r in rs),
                    "dev_shm_peak_mib": statistics.median(r["dev_shm_peak_mib"] for r in rs),
                    "ring": rs[-1]["ring"], "runs": rs}
            report["shapes"][shape] = table
            print(f"\n{shape}: medians of {args.repeats} rounds, epochs 2-{args.epochs}")
            print(f"| variant | records/s | x py-lmdb | worker RSS / PSS MiB | main RSS / PSS MiB | /dev/shm peak MiB |")
            print("|---|---|---|---|---|---|")
            for name, row in table.items():
                print(f"| {name} | {row['records_per_s']:.0f} | {row['ratio_to_pylmdb']:.2f} | "
                      f"{row['worker_peak_rss_mib']:.0f} / {row['worker_peak_pss_mib']:.0f} | "
                      f"{row['main_peak_rss_mib']:.0f} / {row['main_peak_pss_mib']:.0f} | "
                      f"{row['dev_shm_peak_mib']:.1f} |")
            print(flush=True)
    with open(os.path.join(args.out, "collate_bench.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(f"wrote {args.out}/collate_bench.json")


if __name__ == "__main__":
    main()
