"""Worker threads against worker processes: lmdbloader.DataLoader(...,
worker_method="thread") beside worker_method="multiprocessing" with the
fork and forkserver start methods, at W = 1, 2, 4, 8 workers, in one run.

Jobs (persistent workers, batch 32, shuffled, drop_last):
- ``train``: the ImageNet recipe (ImageDecode(224): RandomResizedCrop, flip,
  normalize) over the demo's 1,024 photographs (bench/image_corpus.py);
- ``dinov2``: DINOv2's multi-crop as ImageDecode(crops=...) (2 global crops
  of 224, 8 local ones of 96, colour, blur, solarize: bench/image_bench.py's
  recipe), over the first ``--dinov2-images`` of them;
- ``tensor``: decode="tensor", each record's bytes as a uint8 tensor
  (``--tensor-epochs``: an epoch of it takes a few tens of ms).

Each run is a fresh process (nothing of one variant counted in another's),
the page cache warm; variants alternate within a round, ``--repeats``
rounds. Reported per job, method and W: images/s over the epochs after the
first (median over rounds), its ratio to the fork process loader at the same
W (taken within each round, then the median), the job's peak summed RSS and
PSS over all its processes (lmdbloader.memory: the kernel's counts, sampled
every 0.2 s) and its ratio, and the time from iter() to the first batch.
On a shared machine the figures are noisy: the load average at each run's
start and end is kept in the JSON. Writes bench/out/thread_loader_bench.json.

    python bench/thread_loader_bench.py [--jobs train,dinov2,tensor] [--workers 1,2,4,8]
        [--methods thread,fork,forkserver] [--repeats 3] [--epochs 2] [--tensor-epochs 8] [--images 1024]
        [--dinov2-images 256]
(run from a clone: ``PYTHONPATH=build/tree-package``, as the tests import the tree)
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

METHODS = ("thread", "fork", "forkserver")
BASELINE = "fork"


def run_child(spec):
    import torch
    import lmdbloader
    from image_recipes import fused_decode
    from lmdbloader.memory import snapshot

    job, method, workers = spec["job"], spec["method"], spec["workers"]
    decode = "tensor" if job == "tensor" else fused_decode(job)
    ds = lmdbloader.LmdbDataset(spec["corpus"], decode=decode)
    # The first `images` records, shuffled (every record where they are all).
    sampler = torch.utils.data.SubsetRandomSampler(range(min(spec["images"], len(ds))),
                                                   generator=torch.Generator().manual_seed(spec["seed"]))
    opts = dict(batch_size=spec["batch"], sampler=sampler, num_workers=workers, persistent_workers=True,
                drop_last=True)
    if method == "thread":
        loader = lmdbloader.DataLoader(ds, worker_method="thread", **opts)
    else:
        loader = lmdbloader.DataLoader(ds, multiprocessing_context=method, **opts)

    peak = {"rss": 0, "pss": 0}
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            rows = [r for r in snapshot() if "resource_tracker" not in r["name"]]
            peak["rss"] = max(peak["rss"], sum(r["rss"] for r in rows))
            peak["pss"] = max(peak["pss"], sum(r["pss"] for r in rows))
            stop.wait(0.2)
    sampler = threading.Thread(target=sample, daemon=True)
    load = [os.getloadavg()[0]]
    sampler.start()
    first, seconds, counts = None, [], []
    for epoch in range(spec["epochs"]):
        t, n = time.perf_counter(), 0
        for batch in loader:
            if first is None:
                first = time.perf_counter() - t
            images = batch if job == "tensor" else batch[0]
            n += len(images[0]) if isinstance(images, list) and job != "tensor" else len(images)
            del batch, images
        seconds.append(time.perf_counter() - t)
        counts.append(n)
    stop.set()
    sampler.join()
    load.append(os.getloadavg()[0])
    rates = [n / s for n, s in zip(counts[1:], seconds[1:])] or [counts[0] / seconds[0]]
    return {"images_per_s": statistics.median(rates), "first_batch_s": first, "peak_rss_mib": peak["rss"] / 2**20,
            "peak_pss_mib": peak["pss"] / 2**20, "load": load, "pool": loader.ring_stats() if method == "thread"
            else {}}


def run_one(spec):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "spec.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        out = os.path.join(tmp, "out.json")
        subprocess.run([sys.executable, os.path.abspath(__file__), "--child", path, out], check=True)
        with open(out) as f:
            return json.load(f)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", default="train,dinov2,tensor")
    p.add_argument("--workers", default="1,2,4,8")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--tensor-epochs", type=int, default=8)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--images", type=int, default=1024)
    p.add_argument("--dinov2-images", type=int, default=256)
    p.add_argument("--workdir", default=os.path.join(HERE, "out", "image_corpora"))
    p.add_argument("--out", default=os.path.join(HERE, "out"))
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        with open(args.child[0]) as f:
            spec = json.load(f)
        result = run_child(spec)
        with open(args.child[1], "w") as f:
            json.dump(result, f)
        return
    import image_corpus
    corpus = image_corpus.images(args.workdir, n=args.images)["corpus"]
    subprocess.run(["cat", os.path.join(corpus, "data.mdb")], stdout=subprocess.DEVNULL, check=False)  # warm
    jobs, methods = args.jobs.split(","), args.methods.split(",")
    counts = [int(w) for w in args.workers.split(",")]
    runs = []
    for r in range(args.repeats):
        for job in jobs:
            for w in counts:
                order = methods[r % len(methods):] + methods[:r % len(methods)]  # alternate who goes first
                for method in order:
                    spec = {"job": job, "method": method, "workers": w, "corpus": corpus, "batch": args.batch,
                            "epochs": args.tensor_epochs if job == "tensor" else args.epochs, "seed": r,
                            "images": args.dinov2_images if job == "dinov2" else args.images}
                    got = run_one(spec)
                    runs.append({**spec, **got, "round": r})
                    print(f"round {r} {job:6} W={w} {method:10} {got['images_per_s']:8.1f} images/s  "
                          f"RSS {got['peak_rss_mib']:7.0f} MiB  PSS {got['peak_pss_mib']:7.0f} MiB  "
                          f"first batch {got['first_batch_s']:.2f} s  load {got['load'][0]:.1f}", flush=True)
    table = summarize(runs, jobs, counts, methods)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "thread_loader_bench.json"), "w") as f:
        json.dump({"runs": runs, "table": table, "cpus": os.cpu_count()}, f, indent=1)
    print(f"\nmedians of {args.repeats} rounds; ratios to the fork process loader at the same W, within each round")
    print(f"{'job':7} {'W':>2} {'method':10} {'images/s':>9} {'x fork':>7} {'RSS MiB':>8} {'x fork':>7} "
          f"{'PSS MiB':>8} {'x fork':>7} {'first s':>8}")
    for row in table:
        print(f"{row['job']:7} {row['workers']:>2} {row['method']:10} {row['images_per_s']:9.1f} "
              f"{row['speed_x']:7.2f} {row['peak_rss_mib']:8.0f} {row['rss_x']:7.2f} {row['peak_pss_mib']:8.0f} "
              f"{row['pss_x']:7.2f} {row['first_batch_s']:8.2f}")


def summarize(runs, jobs, counts, methods):
    table = []
    for job in jobs:
        for w in counts:
            for method in methods:
                mine = [r for r in runs if (r["job"], r["workers"], r["method"]) == (job, w, method)]
                base = {r["round"]: r for r in runs if (r["job"], r["workers"], r["method"]) == (job, w, BASELINE)}
                if not mine:
                    continue

                def ratio(key):
                    got = [r[key] / base[r["round"]][key] for r in mine if r["round"] in base]
                    return statistics.median(got) if got else float("nan")
                table.append({"job": job, "workers": w, "method": method,
                              **{k: statistics.median(r[k] for r in mine)
                                 for k in ("images_per_s", "peak_rss_mib", "peak_pss_mib", "first_batch_s")},
                              "speed_x": ratio("images_per_s"), "rss_x": ratio("peak_rss_mib"),
                              "pss_x": ratio("peak_pss_mib")})
    return table


if __name__ == "__main__":
    main()
