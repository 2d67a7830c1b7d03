"""Warm reads of large records in one process, path by path, beside py-lmdb.

Uses the corpora `bench/cold_bench.py` writes (100 KiB and 1 MiB values).
The page cache is filled by a sequential read first; every figure is the best
of 3 random-order passes, batches of 32, each record reduced to its size and
last byte.

    python bench/warm_paths.py [--dir /var/tmp/lmdbloader-cold-bench]
"""

import argparse
import os
import struct
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import page_cache  # noqa: E402

import lmdbloader  # noqa: E402


def digest(raw):
    return len(raw), raw[-1]


def best_of(passes, run, n):
    best = 0
    for _ in range(passes):
        start = time.perf_counter()
        run()
        best = max(best, n / (time.perf_counter() - start))
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/var/tmp/lmdbloader-cold-bench")
    args = ap.parse_args()
    print("| values | path | records/s | vs py-lmdb |")
    print("|---|---|---|---|")
    for name in ("100KiB", "1MiB"):
        path = os.path.join(args.dir, name)
        page_cache.read_sequentially(path)
        n = len(lmdbloader.Reader(path))
        order = np.random.default_rng(0).permutation(n).tolist()
        batches = [order[i:i + 32] for i in range(0, n, 32)]
        rows = []
        for label, kw, how in (
                ("get_batch, then decode each", {}, "get_batch"),
                ("apply_batch (LmdbDataset's path)", {}, "apply"),
                ("apply_batch, checksums off", dict(verify_checksums=False), "apply"),
                ("apply_batch, mode=mmap, checksums off", dict(mode="mmap", verify_checksums=False), "apply"),
                ("apply_batch, views (mode=mmap, 96 MiB budget)", dict(mode="mmap", rss_budget="96MiB"), "views"),
                ("apply_batch, views, checked once", dict(mode="mmap", rss_budget="96MiB",
                                                          verify_checksums="once"), "views"),
                ("apply_batch, views, checksums off", dict(mode="mmap", rss_budget="96MiB",
                                                           verify_checksums=False), "views")):
            r = lmdbloader.Reader(path, cache="exact", **kw)
            if how == "get_batch":
                def run(r=r):
                    for b in batches:
                        [digest(x) for x in r.get_batch(b)]
            else:
                def run(r=r, views=how == "views"):
                    for b in batches:
                        r.apply_batch(b, digest, views=views)
            rows.append((label, best_of(3, run, n)))
        import lmdb
        env = lmdb.open(path, readonly=True, lock=False)
        with env.begin() as txn:
            def run_pylmdb():
                for i in order:
                    digest(txn.get(struct.pack(">Q", i)))
            base = best_of(3, run_pylmdb, n)
        env.close()
        for label, rate in rows:
            print(f"| {name} | {label} | {rate:,.0f} | {rate / base:.2f}x |")
        print(f"| {name} | py-lmdb `txn.get` | {base:,.0f} | 1.00x |")


if __name__ == "__main__":
    main()
