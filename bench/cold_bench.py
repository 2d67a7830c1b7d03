"""Cold reads: lmdbloader beside fio's limit and py-lmdb, the cache evicted
before every run.

For records of 2 KiB, 100 KiB and 1 MiB, in one run:
- fio: random reads of the corpus's own data file at the record's on-disk
  size (O_DIRECT, io_uring) at queue depth 1 and 32: the device's limit;
- `lmdbloader scan --order random` (default settings, and --cache exact);
- py-lmdb: random txn.get in one process;
- a DataLoader (2 and 8 persistent workers, shuffled, batch 32, workers
  return a checksum) over LmdbDataset and over py-lmdb: a cold epoch 1, then
  epochs 2-3; and epochs 2-3 after a sequential warm-up instead (the
  warm-up's epoch 1, which also starts the workers, is not compared); the
  three jobs alternate --repeats times and each epoch's median is reported;
- the page cache each leaves behind (folio sizes from /proc/kpageflags);
- zero-copy views (LmdbDataset(views=True), mode="mmap") with checksums on
  and off, beside the default LmdbDataset and py-lmdb in the same DataLoader
  (100 KiB and 1 MiB; --views-only runs just this and merges it in);
- LocalitySampler against the perfect shuffle, cold, in a memory cgroup
  smaller than the corpus when one can be made (a corpus bigger than RAM),
  with the shuffle quality of each window.

    python bench/cold_bench.py [--dir DIR] [--quick] [--repeats 3] [--out bench/out]

Writes DIR/../cold_bench.json (under --out) and prints the tables the README shows.
"""

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
import page_cache  # noqa: E402
from pylmdb_baseline import PyLmdbRecords  # noqa: E402

import lmdbloader  # noqa: E402

SIZES = {"2KiB": (2 << 10, 200_000), "100KiB": (100 << 10, 4_000), "1MiB": (1 << 20, 512)}
QUICK = {"2KiB": (2 << 10, 50_000), "100KiB": (100 << 10, 1_000), "1MiB": (1 << 20, 128)}
CLASSES = 100


def make_corpus(path, value_size, count):
    """Records of random bytes, written class by class (label = position * 100 // count),
    as `lmdbloader convert` writes an image folder."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(os.path.join(path, "data.mdb")):
        r = lmdbloader.Reader(path, index_dir="none")
        if len(r) == count and r.manifest.get("value_size") == value_size:
            return
    rng = np.random.default_rng(value_size)
    blob = rng.integers(0, 256, size=value_size * 8, dtype=np.uint8).tobytes()
    with lmdbloader.CorpusWriter(path, overwrite=True, manifest={"value_size": value_size}) as w:
        for i in range(count):
            at = (i * 4099) % (len(blob) - value_size)
            w.add(str(i), blob[at:at + value_size], label=i * CLASSES // count)


def on_disk_block(value_size):
    """LMDB stores a value bigger than half a page on its own pages, after a 16-byte header."""
    return (value_size + 16 + 4095) // 4096 * 4096


def fio(path, block, depth, seconds):
    out = subprocess.run(
        ["fio", "--name=cold", f"--filename={path}", "--readonly", "--rw=randread", f"--bs={block}",
         "--direct=1", "--ioengine=io_uring", f"--iodepth={depth}", f"--runtime={seconds}", "--time_based",
         "--output-format=json"], capture_output=True, text=True, check=True)
    read = json.loads(out.stdout)["jobs"][0]["read"]
    return {"iops": read["iops"], "mb_per_s": read["bw_bytes"] / 1e6}


def scan(path, *extra):
    page_cache.evict(path)
    out = subprocess.run(["lmdbloader", "scan", path, "--order", "random", "--json", *extra],
                         capture_output=True, text=True, check=True)
    j = json.loads(out.stdout)
    return {"records_per_s": j["records_per_s"], "mb_per_s": j["mb_per_s"], "io_engine": j["io_engine"],
            "cache_policy": j["cache_policy"]}


def pylmdb_random(path, count, seconds):
    import lmdb
    page_cache.evict(path)
    env = lmdb.open(path, readonly=True, lock=False, readahead=False, meminit=False)
    order = np.random.default_rng(1).permutation(count)
    n = nbytes = 0
    start = time.perf_counter()
    with env.begin() as txn:
        for i in order:
            nbytes += len(txn.get(struct.pack(">Q", int(i))))
            n += 1
            if n % 256 == 0 and time.perf_counter() - start > seconds:
                break
    dt = time.perf_counter() - start
    env.close()
    return {"records_per_s": n / dt, "mb_per_s": nbytes / dt / 1e6}


class PyLmdbChecksums(PyLmdbRecords):
    """py-lmdb as training code opens it: lazily per worker, one get per record."""

    def value(self, i, raw):
        return digest(raw)


def digest(raw):
    """What a worker returns: the record's size and last byte. A real hash
    over every byte (adler32 runs at ~1.5 GB/s) would time the hash, not
    the loader."""
    return len(raw), raw[-1]


def dataloader_epochs(dataset, workers, epochs, prepare):
    from torch.utils.data import DataLoader
    loader = DataLoader(dataset, batch_size=32, shuffle=True, num_workers=workers, persistent_workers=True,
                        collate_fn=lambda b: b, generator=__import__("torch").Generator().manual_seed(0))
    prepare()
    rates = []
    for _ in range(epochs):
        start = time.perf_counter()
        n = sum(len(b) for b in loader)
        rates.append(n / (time.perf_counter() - start))
    del loader
    return rates


def lmdbloader_dataset(path, **kw):
    return lmdbloader.LmdbDataset(path, decode=digest, **kw)


def warm_random_pass(path):
    """How fast the cache serves a later epoch: the best of 3 single-process
    passes in random order, reading exactly (no fills), checksums off, each
    record dropped at once (Reader.apply_batch), so that the copy out of the
    page cache is what is timed."""
    r = lmdbloader.Reader(path, cache="exact", index_dir="none", verify_checksums=False, io_engine="sync")
    order = np.random.default_rng(2).permutation(len(r)).tolist()
    best = 0
    for _ in range(3):
        nbytes = 0
        start = time.perf_counter()
        for i in range(0, len(order), 32):
            nbytes += sum(r.apply_batch(order[i:i + 32], len))
        best = max(best, nbytes / (time.perf_counter() - start) / 1e9)
    return best


# Views keep pages mapped: under a budget of a quarter of the smaller corpus
# (the default is unbounded), so that they are measured releasing pages.
VIEWS_BUDGET = "96MiB"


def views_study(directory, sizes, repeats):
    """Cold epoch 1 then epochs 2-3 of large records: the default LmdbDataset
    (a copy out of the page cache), zero-copy views (rss_budget VIEWS_BUDGET)
    with checksums on, checked once and off, and py-lmdb, alternating, medians of `repeats`
    runs."""
    out = {}
    for name in ("100KiB", "1MiB"):
        path = os.path.join(directory, name)
        count = sizes[name][1]
        out[name] = {}
        for workers in (2, 8):
            cold = lambda: page_cache.evict(path)  # noqa: E731
            seq = lambda: page_cache.read_sequentially(path)  # noqa: E731
            jobs = {
                "pylmdb": lambda: PyLmdbChecksums(path, count),
                "lmdbloader": lambda: lmdbloader_dataset(path),
                "views": lambda: lmdbloader_dataset(path, views=True, rss_budget=VIEWS_BUDGET),
                "views_checked_once": lambda: lmdbloader_dataset(path, views=True, verify_checksums="once",
                                                                 rss_budget=VIEWS_BUDGET),
                "views_no_checksums": lambda: lmdbloader_dataset(path, views=True, verify_checksums=False,
                                                                 rss_budget=VIEWS_BUDGET),
            }
            runs = {k: [] for k in jobs}
            runs["views_checked_once_after_sequential_warmup"] = []
            for _ in range(repeats):
                for k, make in jobs.items():
                    runs[k].append(dataloader_epochs(make(), workers, 3, cold))
                runs["views_checked_once_after_sequential_warmup"].append(
                    dataloader_epochs(jobs["views_checked_once"](), workers, 3, seq))
            out[name][workers] = {k: [statistics.median(e) for e in zip(*v)] for k, v in runs.items()}
            out[name][workers]["runs"] = runs
            print("views", name, workers, json.dumps(out[name][workers]), flush=True)
    return out


def page_cache_study(path):
    """What each way of reading a cold corpus leaves in the cache, and how fast a later epoch reads it."""
    data = os.path.join(path, "data.mdb")
    out = {}

    def row(name, fill):
        page_cache.evict(path)
        fill()
        hist = page_cache.folio_sizes(data)
        out[name] = {"folios": page_cache.summarize_folios(hist), "histogram_kib": hist,
                     "cached_mib": page_cache.cached_bytes(data) / 2**20,
                     "later_epoch_gb_per_s": warm_random_pass(path)}

    def epoch(cache):
        r = lmdbloader.Reader(path, cache=cache, index_dir="none")
        order = np.random.default_rng(3).permutation(len(r)).tolist()
        for i in range(0, len(order), 32):
            r.get_batch(order[i:i + 32])

    row("sequential read (cat)", lambda: page_cache.read_sequentially(path))
    row("random epoch, cache=exact", lambda: epoch("exact"))
    row("random epoch, cache=fill", lambda: epoch("fill"))
    page_cache.evict(path)
    epoch("drop")
    out["random epoch, cache=drop"] = {"cached_mib": page_cache.cached_bytes(data) / 2**20}
    return out


def shuffle_quality(labels, order, batch=32):
    """Mean number of distinct labels in a batch (a perfect shuffle of 100
    equal classes gives about 27.6 in 32; one class per batch gives 1)."""
    labels = np.asarray(labels)
    return float(np.mean([len(np.unique(labels[order[i:i + batch]]))
                          for i in range(0, len(order) - batch + 1, batch)]))


def sampler_epoch(path, sampler_window, cache, seconds):
    """One cold epoch in one process, batches of 64 through get_batch (time-capped)."""
    page_cache.evict(path)
    r = lmdbloader.Reader(path, cache=cache)
    if sampler_window is None:
        order = np.random.default_rng(0).permutation(len(r)).tolist()
    else:
        order = list(lmdbloader.LocalitySampler(r, window=sampler_window))
    n = 0
    start = time.perf_counter()
    for i in range(0, len(order), 64):
        n += len(r.get_batch(order[i:i + 64]))
        if time.perf_counter() - start > seconds:
            break
    return {"records_per_s": n / (time.perf_counter() - start), "cache_policy": r.stats()["cache_policy"]}


def memory_cgroup(limit_bytes):
    """A memory cgroup limited to `limit_bytes` that this process may move a
    child into (cgroup v1 or v2, as root); None when none can be made."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
        for line in lines:
            _, controllers, rel = line.split(":", 2)
            if "memory" in controllers.split(","):
                base, limit_file = f"/sys/fs/cgroup/memory{rel}", "memory.limit_in_bytes"
                break
        else:
            rel = next(line.split(":", 2)[2] for line in lines if line.startswith("0::"))
            base, limit_file = f"/sys/fs/cgroup{rel}", "memory.max"
        group = os.path.join(base, "lmdbloader-cold-bench")
        os.makedirs(group, exist_ok=True)
        with open(os.path.join(group, limit_file), "w") as f:
            f.write(str(limit_bytes))
        return group
    except (OSError, StopIteration, ValueError):
        return None


def run_sampler_study(path, quick):
    """Run in a child inside the cgroup (see main)."""
    r = lmdbloader.Reader(path, index_dir="none")
    labels = r.column("label").astype(np.int64)
    seconds = 8 if quick else 20
    rows = {"perfect shuffle, cache=auto": sampler_epoch(path, None, "auto", seconds)}
    rows["perfect shuffle, cache=auto"]["labels_per_batch"] = shuffle_quality(
        labels, np.random.default_rng(0).permutation(len(r)))
    for window in (4, 8, 16, 64):
        row = sampler_epoch(path, window, "fill", seconds)
        row["labels_per_batch"] = shuffle_quality(labels, np.array(list(lmdbloader.LocalitySampler(r, window=window))))
        rows[f"LocalitySampler window={window}, cache=fill"] = row
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/var/tmp/lmdbloader-cold-bench")
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    ap.add_argument("--quick", action="store_true", help="smaller corpora, shorter runs")
    ap.add_argument("--repeats", type=int, default=3, help="DataLoader runs per configuration (median)")
    ap.add_argument("--sampler-study", help=argparse.SUPPRESS)  # internal: run inside the cgroup
    ap.add_argument("--views-only", action="store_true",
                    help="only the zero-copy views study (corpora already written), merged into the JSON")
    ap.add_argument("--page-cache-only", action="store_true",
                    help="only the page cache study (corpora already written), merged into the JSON")
    args = ap.parse_args()
    if args.page_cache_only:
        out_json = os.path.join(args.out, "cold_bench.json")
        with open(out_json) as f:
            results = json.load(f)
        results["page_cache"] = page_cache_study(os.path.join(args.dir, "100KiB"))
        with open(out_json, "w") as f:
            json.dump(results, f, indent=1)
        print_tables(results)
        return
    if args.views_only:
        out_json = os.path.join(args.out, "cold_bench.json")
        with open(out_json) as f:
            results = json.load(f)
        os.environ.setdefault("LMDBLOADER_INDEX_DIR", os.path.join(args.dir, "index-cache"))
        results["views"] = views_study(args.dir, QUICK if args.quick else SIZES, args.repeats)
        with open(out_json, "w") as f:
            json.dump(results, f, indent=1)
        print_tables(results)
        return
    if args.sampler_study:
        print(json.dumps(run_sampler_study(args.sampler_study, args.quick)))
        return
    os.environ.setdefault("LMDBLOADER_INDEX_DIR", os.path.join(args.dir, "index-cache"))
    sizes = QUICK if args.quick else SIZES
    fio_seconds = 2 if args.quick else 4
    results = {"sizes": {}}
    for name, (value_size, count) in sizes.items():
        path = os.path.join(args.dir, name)
        make_corpus(path, value_size, count)
        lmdbloader.Reader(path)  # saves the record index to the cache: every run opens alike
        data = os.path.join(path, "data.mdb")
        block = on_disk_block(value_size)
        res = {"records": count, "value_size": value_size, "fio_block": block}
        res["fio_qd1"] = fio(data, block, 1, fio_seconds)
        res["fio_qd32"] = fio(data, block, 32, fio_seconds)
        res["scan"] = scan(path)
        res["scan_exact"] = scan(path, "--cache", "exact")
        res["pylmdb_random"] = pylmdb_random(path, count, 6 if args.quick else 12)
        res["dataloader"] = {}
        for workers in (2, 8):
            cold = lambda: page_cache.evict(path)  # noqa: E731
            seq = lambda: page_cache.read_sequentially(path)  # noqa: E731
            runs = {"lmdbloader_cold": [], "lmdbloader_after_sequential_warmup": [], "pylmdb_cold": []}
            for _ in range(args.repeats):  # the three jobs alternate; medians per epoch
                runs["lmdbloader_cold"].append(dataloader_epochs(lmdbloader_dataset(path), workers, 3, cold))
                runs["lmdbloader_after_sequential_warmup"].append(
                    dataloader_epochs(lmdbloader_dataset(path), workers, 3, seq))
                runs["pylmdb_cold"].append(dataloader_epochs(PyLmdbChecksums(path, count), workers, 3, cold))
            res["dataloader"][workers] = {k: [statistics.median(e) for e in zip(*v)] for k, v in runs.items()}
            res["dataloader"][workers]["runs"] = runs
        results["sizes"][name] = res
        print(name, json.dumps(res), flush=True)
    results["page_cache"] = page_cache_study(os.path.join(args.dir, "100KiB"))
    print("page cache", json.dumps(results["page_cache"]), flush=True)
    results["views"] = views_study(args.dir, sizes, args.repeats)

    small = os.path.join(args.dir, "2KiB")
    corpus_bytes = os.path.getsize(os.path.join(small, "data.mdb"))
    # Half the corpus, plus room for the process itself (Python, numpy: ~64 MiB).
    limit = corpus_bytes // 2 + (64 << 20)
    group = memory_cgroup(limit)
    results["sampler_memory_limit_bytes"] = limit if group else None

    def enter_group():
        if group:
            with open(os.path.join(group, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))

    out = subprocess.run([sys.executable, __file__, "--sampler-study", small] + (["--quick"] if args.quick else []),
                         capture_output=True, text=True, check=True, preexec_fn=enter_group)
    results["sampler"] = json.loads(out.stdout.strip().splitlines()[-1])
    print("sampler", json.dumps(results["sampler"]), flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "cold_bench.json"), "w") as f:
        json.dump(results, f, indent=1)
    print_tables(results)


def print_tables(results):
    print("\n| values | fio QD1 | fio QD32 | scan (default) | scan --cache exact | vs fio QD32 | py-lmdb | scan / py-lmdb |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in results["sizes"].items():
        unit, key, scale = ("records/s", "iops", 1) if r["value_size"] < (64 << 10) else ("MB/s", "mb_per_s", 1)
        k = "records_per_s" if key == "iops" else "mb_per_s"
        q1, q32 = r["fio_qd1"][key] * scale, r["fio_qd32"][key] * scale
        s, se, py = r["scan"][k], r["scan_exact"][k], r["pylmdb_random"][k]
        print(f"| {name} ({unit}) | {q1:,.0f} | {q32:,.0f} | {s:,.0f} | {se:,.0f} | {s / q32:.2f}x / {se / q32:.2f}x "
              f"| {py:,.0f} | {s / py:.1f}x |")
    print("\n| values | workers | lmdbloader epochs 1 / 2 / 3 | after sequential warm-up 2 / 3 | py-lmdb 1 / 2 / 3 "
          "| epochs 2-3 vs warm-up | vs py-lmdb |")
    print("|---|---|---|---|---|---|---|")
    for name, r in results["sizes"].items():
        for workers, d in r["dataloader"].items():
            c, w, p = d["lmdbloader_cold"], d["lmdbloader_after_sequential_warmup"], d["pylmdb_cold"]
            later = statistics.mean(c[1:])
            print(f"| {name} | {workers} | {' / '.join(f'{x:,.0f}' for x in c)} "
                  f"| {' / '.join(f'{x:,.0f}' for x in w[1:])} "
                  f"| {' / '.join(f'{x:,.0f}' for x in p)} | {later / statistics.mean(w[1:]):.2f}x "
                  f"| {later / statistics.mean(p[1:]):.2f}x (epoch 1: {c[0] / p[0]:.1f}x) |")
    if "views" in results:
        print("\n| values | workers | epoch | py-lmdb | lmdbloader | views | views, checked once "
              "| views, checksums off |")
        print("|---|---|---|---|---|---|---|---|")
        warm_rows = []  # checked once after a cold epoch against after a sequential warm-up
        for name, by_workers in results["views"].items():
            for workers, d in by_workers.items():
                p = d["pylmdb"]
                for label, e in (("1 (cold)", [0]), ("2-3", [1, 2])):
                    def cell(k):
                        if k not in d:  # results of an earlier version of this study
                            return ""
                        v = statistics.mean(d[k][i] for i in e)
                        return f"{v:,.0f} ({v / statistics.mean(p[i] for i in e):.2f}x)"
                    print(f"| {name} | {workers} | {label} | {statistics.mean(p[i] for i in e):,.0f} "
                          f"| {cell('lmdbloader')} | {cell('views')} | {cell('views_checked_once')} "
                          f"| {cell('views_no_checksums')} |")
                warm = d.get("views_checked_once_after_sequential_warmup")
                if warm:
                    after_cold, after_warmup = statistics.mean(d["views_checked_once"][1:]), statistics.mean(warm[1:])
                    warm_rows.append(f"| {name} | {workers} | {after_cold:,.0f} | {after_warmup:,.0f} "
                                     f"| {after_cold / after_warmup:.2f}x |")
        if warm_rows:
            print("\n| values | workers | views checked once, epochs 2-3 after a cold epoch 1 "
                  "| after a sequential warm-up | ratio |")
            print("|---|---|---|---|---|")
            print("\n".join(warm_rows))
    print("\n| how the cold 100 KiB corpus was read | folios left | later epoch (GB/s) |")
    print("|---|---|---|")
    for name, r in results["page_cache"].items():
        if "folios" in r:
            print(f"| {name} | {r['folios']} | {r['later_epoch_gb_per_s']:.2f} |")
        else:
            print(f"| {name} | {r['cached_mib']:.0f} MiB of the file left in the cache | |")
    limit = results["sampler_memory_limit_bytes"]
    print(f"\nmemory limit: {limit / 2**20:.0f} MiB" if limit else "\nno memory cgroup: corpus fits in RAM")
    print("| 2 KiB records, cold epoch | records/s | vs perfect shuffle | distinct labels in a batch of 32 |")
    print("|---|---|---|---|")
    base = results["sampler"]["perfect shuffle, cache=auto"]["records_per_s"]
    for name, r in results["sampler"].items():
        print(f"| {name} ({r['cache_policy']}) | {r['records_per_s']:,.0f} | {r['records_per_s'] / base:.1f}x "
              f"| {r['labels_per_batch']:.1f} |")


if __name__ == "__main__":
    main()
