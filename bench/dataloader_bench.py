"""The same DataLoader job over py-lmdb and over lmdbloader, side by side.

Generates a corpus of video-style records (frames, label, name), warms the page
cache with a sequential read, then runs `epochs` epochs with persistent
workers, sampling every worker's RSS and PSS from /proc. Writes JSON and a PNG
of per-worker RSS over time, and prints records/s and the ratio.

    python bench/dataloader_bench.py [--corpus-mib 512] [--budget 32MiB] [--out bench/out]
"""

import argparse
import json
import os
import struct
import sys
import tempfile
import time

import msgpack
import torch
from torch.utils.data import DataLoader, Dataset

import lmdbloader
from lmdbloader.memory import Sampler

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
from conftest import warm_page_cache, write_video_folders  # noqa: E402


def summarize(record):
    return record["label"], sum(len(f) for f in record["frames"])


class PyLmdbDataset(Dataset):
    """What training code usually does: py-lmdb opened lazily in each worker."""

    def __init__(self, path, length):
        self.path, self.length, self.env = path, length, None

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        import lmdb
        if self.env is None:
            self.env = lmdb.open(self.path, readonly=True, lock=False, readahead=False, meminit=False)
        with self.env.begin() as txn:
            return summarize(msgpack.unpackb(txn.get(struct.pack(">Q", i))))


def run(name, dataset, epochs, workers, batch):
    loader = DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=workers,
                        persistent_workers=True, collate_fn=lambda b: b)
    sampler = Sampler(interval=0.05).start()
    start = time.perf_counter()
    n = 0
    for _ in range(epochs):
        for b in loader:
            n += len(b)
    seconds = time.perf_counter() - start
    samples = sampler.stop()
    del loader
    me = os.getpid()
    workers_samples = [s for s in samples if s["pid"] != me]
    peak = {}
    for s in workers_samples:
        peak[s["pid"]] = max(peak.get(s["pid"], 0), s["rss"])
    return {"name": name, "records": n, "seconds": seconds, "records_per_s": n / seconds,
            "peak_worker_rss_mib": {str(k): v / 2**20 for k, v in peak.items()},
            "samples": [{k: s[k] for k in ("time", "pid", "rss", "pss")} for s in workers_samples]}


def plot(results, budget, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(results), figsize=(12, 4.5), sharey=True)
    for ax, res in zip(axes, results):
        for pid in sorted({s["pid"] for s in res["samples"]}):
            rows = [s for s in res["samples"] if s["pid"] == pid]
            line, = ax.plot([r["time"] for r in rows], [r["rss"] / 2**20 for r in rows], label=f"worker {pid} RSS")
            ax.plot([r["time"] for r in rows], [r["pss"] / 2**20 for r in rows], "--", color=line.get_color(),
                    label=f"worker {pid} PSS")
        ax.set_title(f"{res['name']}: {res['records_per_s']:.0f} records/s")
        ax.set_xlabel("seconds")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("MiB")
    fig.suptitle(f"DataLoader workers, persistent, budget {budget / 2**20:.0f} MiB for lmdbloader")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus-mib", type=int, default=512)
    p.add_argument("--budget", default="32MiB")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--out", default=os.path.join(HERE, "out"))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    budget = lmdbloader._options.byte_size(args.budget, "--budget")
    frame, frames = 32 * 1024, 8
    videos = args.corpus_mib * 2**20 // (frame * frames)
    with tempfile.TemporaryDirectory(dir=args.out) as tmp:
        print(f"generating {videos} videos x {frames} frames of {frame // 1024} KiB ...", flush=True)
        write_video_folders(os.path.join(tmp, "frames"), videos, frames, frame)
        corpus = os.path.join(tmp, "corpus")
        summary = lmdbloader.convert(os.path.join(tmp, "frames"), corpus, kind="video_folder")
        print(f"corpus: {summary['records']} records, {summary['bytes'] / 1e6:.0f} MB", flush=True)
        results = []
        for name, ds in [("py-lmdb", PyLmdbDataset(corpus, videos)),
                         ("lmdbloader", lmdbloader.LmdbDataset(corpus, rss_budget=budget, transform=summarize))]:
            warm_page_cache(os.path.join(corpus, "data.mdb"))
            res = run(name, ds, args.epochs, args.workers, args.batch)
            results.append(res)
            peaks = ", ".join(f"{v:.0f}" for v in res["peak_worker_rss_mib"].values())
            print(f"{name:11s} {res['records_per_s']:8.0f} records/s   peak worker RSS MiB: {peaks}", flush=True)
    ratio = results[1]["records_per_s"] / results[0]["records_per_s"]
    print(f"lmdbloader / py-lmdb throughput: {ratio:.2f}x; budget {budget / 2**20:.0f} MiB per worker")
    with open(os.path.join(args.out, "dataloader_bench.json"), "w") as f:
        json.dump({"budget_bytes": budget, "corpus_mib": args.corpus_mib, "ratio": ratio, "torch": torch.__version__,
                   "results": results}, f, indent=1)
    plot(results, budget, os.path.join(args.out, "dataloader_bench.png"))
    print(f"wrote {args.out}/dataloader_bench.json and .png")


if __name__ == "__main__":
    main()
