"""What opening a database costs, cold (data file and saved index evicted from
the page cache with posix_fadvise(DONTNEED) before each open) and warm: the checked page walk
(no saved index) against loading a saved index, on small-value and
large-value databases written by py-lmdb. Medians of --repeats, alternating.

    python3 bench/open_cold_bench.py [--repeats 3] [--dir /tmp/open-bench]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import lmdb

import lmdbloader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from page_cache import evict  # noqa: E402

SHAPES = {"1000 B values (inline)": (131072, 1000), "100 KiB values (overflow pages)": (2560, 100 * 1024)}


def timed_open(path, index_dir, cold):
    if cold:  # the data file and any saved index come from the device
        evict(os.path.join(path, "data.mdb"))
        if index_dir != "none":
            for name in os.listdir(index_dir):
                evict(os.path.join(index_dir, name))
    start = time.perf_counter()
    r = lmdbloader.Reader(path, index_dir=index_dir)
    seconds = time.perf_counter() - start
    assert len(r) > 0
    return seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    root = args.dir or tempfile.mkdtemp(prefix="open-bench-")
    os.makedirs(root, exist_ok=True)
    print(f"{'database':34} {'cache':5} {'checked walk':>14} {'saved index':>12}")
    for label, (count, size) in SHAPES.items():
        path = os.path.join(root, f"db-{size}")
        if not os.path.exists(path):
            with lmdb.open(path, map_size=count * (size + 4200) + (64 << 20)) as env, env.begin(write=True) as txn:
                value = os.urandom(size)
                for i in range(count):
                    txn.put(i.to_bytes(8, "big"), value)
        index_dir = os.path.join(root, f"index-{size}")
        lmdbloader.Reader(path, index_dir=index_dir)  # saves the index there
        for cold in (True, False):
            walk, load = [], []
            for _ in range(args.repeats):
                walk.append(timed_open(path, "none", cold))
                load.append(timed_open(path, index_dir, cold))
            print(f"{label:34} {'cold' if cold else 'warm':5} {statistics.median(walk) * 1e3:11.1f} ms "
                  f"{statistics.median(load) * 1e3:9.1f} ms")


if __name__ == "__main__":
    main()
