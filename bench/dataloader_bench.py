"""The same DataLoader job over py-lmdb and over lmdbloader, side by side.

Generates a corpus of video-style records (frames, label, name), warms the page
cache with a sequential read, then runs `epochs` epochs with persistent
workers, sampling every worker's RSS and PSS from /proc. Writes JSON and a PNG
of per-worker RSS over time, and prints records/s and the ratio.

    python bench/dataloader_bench.py [--corpus-mib 1024] [--budget 32MiB] [--repeats 3] [--out bench/out]
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch
from torch.utils.data import DataLoader

import lmdbloader
from lmdbloader.memory import Sampler

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
from conftest import warm_page_cache, write_video_folders  # noqa: E402
from pylmdb_baseline import PyLmdbDataset  # noqa: E402


def summarize(record):
    return record["label"], sum(len(f) for f in record["frames"])


def run(name, dataset, epochs, workers, batch):
    loader = DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=workers,
                        persistent_workers=True, collate_fn=lambda b: b)
    sampler = Sampler(interval=0.01).start()
    start = time.perf_counter()
    epoch_seconds = []
    n = 0
    for _ in range(epochs):
        t = time.perf_counter()
        for b in loader:
            n += len(b)
        epoch_seconds.append(time.perf_counter() - t)
    seconds = time.perf_counter() - start
    samples = sampler.stop()
    del loader
    me = os.getpid()
    worker_samples = [s for s in samples if s["pid"] != me]
    first, peak = {}, {}
    for s in worker_samples:
        first.setdefault(s["pid"], s["rss"])
        peak[s["pid"]] = max(peak.get(s["pid"], 0), s["rss"])
    per_epoch = n / epochs
    steady = per_epoch * (epochs - 1) / sum(epoch_seconds[1:]) if epochs > 1 else None
    return {"name": name, "records": n, "seconds": seconds, "records_per_s": n / seconds,
            "steady_records_per_s": steady, "epoch_seconds": epoch_seconds,
            "peak_worker_rss_mib": {str(k): v / 2**20 for k, v in peak.items()},
            "worker_rss_growth_mib": {str(k): (peak[k] - first[k]) / 2**20 for k in peak},
            "samples": [{k: s[k] for k in ("time", "pid", "rss", "pss")} for s in worker_samples]}


def plot(results, budget, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(results), figsize=(12, 4.5), sharey=True)
    for ax, res in zip(axes, results):
        starts = []
        for k, pid in enumerate(sorted({s["pid"] for s in res["samples"]})):
            rows = [s for s in res["samples"] if s["pid"] == pid]
            starts.append(rows[0]["rss"])
            line, = ax.plot([r["time"] for r in rows], [r["rss"] / 2**20 for r in rows], label=f"worker {k} RSS")
            ax.plot([r["time"] for r in rows], [r["pss"] / 2**20 for r in rows], "--", color=line.get_color(),
                    label=f"worker {k} PSS")
        if starts:
            ax.axhline((min(starts) + budget) / 2**20, color="red", linestyle=":", linewidth=1,
                       label="worker start + budget")
        ax.set_title(f"{res['name']}: {res['records_per_s']:.0f} records/s")
        ax.set_xlabel("seconds since the first batch was requested")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("MiB")
    fig.suptitle(f"DataLoader workers, persistent, budget {budget / 2**20:.0f} MiB for lmdbloader")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus-mib", type=int, default=1024)
    p.add_argument("--budget", default="32MiB")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3,
                   help="alternating runs of each; ratios are medians over the pairs")
    p.add_argument("--out", default=os.path.join(HERE, "out"))
    p.add_argument("--no-verify-checksums", action="store_true",
                   help="lmdbloader skips checking each record's checksum")
    args = p.parse_args()
    if args.epochs < 2 or args.repeats < 1:
        p.error("--epochs must be at least 2 (epochs 2+ are reported) and --repeats at least 1")
    os.makedirs(args.out, exist_ok=True)
    budget = lmdbloader._options.byte_size(args.budget, "--budget")
    frame, frames = 32 * 1024, 8
    videos = args.corpus_mib * 2**20 // (frame * frames)
    runs = {"py-lmdb": [], "lmdbloader": []}
    with tempfile.TemporaryDirectory(dir=args.out) as tmp:
        print(f"generating {videos} videos x {frames} frames of {frame // 1024} KiB ...", flush=True)
        write_video_folders(os.path.join(tmp, "frames"), videos, frames, frame)
        corpus = os.path.join(tmp, "corpus")
        summary = lmdbloader.convert(os.path.join(tmp, "frames"), corpus, kind="video_folder")
        print(f"corpus: {summary['records']} records, {summary['bytes'] / 1e6:.0f} MB", flush=True)
        for _ in range(args.repeats):
            for name, ds in [("py-lmdb", PyLmdbDataset(corpus, transform=summarize)),
                             ("lmdbloader", lmdbloader.LmdbDataset(corpus, rss_budget=budget, transform=summarize,
                                                                   verify_checksums=not args.no_verify_checksums))]:
                warm_page_cache(os.path.join(corpus, "data.mdb"))
                res = run(name, ds, args.epochs, args.workers, args.batch)
                runs[name].append(res)
                peaks = ", ".join(f"{v:.0f}" for v in res["peak_worker_rss_mib"].values())
                growth = ", ".join(f"{v:.1f}" for v in res["worker_rss_growth_mib"].values())
                print(f"{name:11s} {res['records_per_s']:8.0f} records/s (epochs 2+: "
                      f"{res['steady_records_per_s']:.0f})   peak worker RSS MiB: {peaks}   growth MiB: {growth}",
                      flush=True)
    pairs = list(zip(runs["py-lmdb"], runs["lmdbloader"]))
    ratio = statistics.median(b["records_per_s"] / a["records_per_s"] for a, b in pairs)
    steady_ratio = statistics.median(b["steady_records_per_s"] / a["steady_records_per_s"] for a, b in pairs)
    print(f"lmdbloader / py-lmdb throughput (median of {len(pairs)} pairs): {ratio:.2f}x over all epochs, "
          f"{steady_ratio:.2f}x over epochs 2+; budget {budget / 2**20:.0f} MiB per worker")
    with open(os.path.join(args.out, "dataloader_bench.json"), "w") as f:
        json.dump({"budget_bytes": budget, "corpus_mib": args.corpus_mib, "epochs": args.epochs,
                   "workers": args.workers, "batch": args.batch, "ratio": ratio, "steady_ratio": steady_ratio,
                   "torch": torch.__version__, "runs": runs}, f, indent=1)
    plot([runs["py-lmdb"][0], runs["lmdbloader"][0]], budget, os.path.join(args.out, "dataloader_bench.png"))
    print(f"wrote {args.out}/dataloader_bench.json and .png (the plot shows the first pair)")


if __name__ == "__main__":
    main()
