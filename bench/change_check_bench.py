"""What the reader's check for files written in place costs on the read path.

After each batch (and each single read) the Reader takes one fstat of each
file it read and compares size, mtime and ctime with the identity it indexed
(src/reader/reader_open.cc, SameFile). This bench reads the same records
through this tree's package and through another build of the package given
with --baseline (for example the commit before the check, laid out by
tests/python/tree_package.py in its own worktree), alternating the two, with
py-lmdb's txn.get loop in the same run as the common baseline:

- records of 2 KiB and 256 KiB, random get_batch of 64 and single r[i] reads;
- warm (the file in the page cache) and cold (posix_fadvise DONTNEED of the
  data file before each run).

    python bench/change_check_bench.py --baseline /path/to/other/build/tree-package
        [--dir /var/tmp/lmdbloader-change-bench] [--rounds 3]

Prints records/s (medians of the rounds) and each ratio to the baseline build.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TREE = os.path.join(HERE, "..", "build", "tree-package")

SIZES = {"2KiB": (2048, 40000), "256KiB": (256 << 10, 400)}

RUN = r"""
import json, os, random, sys, time
kind, path, size, count, temp, cold = sys.argv[1:7]
count = int(count)
def evict():
    data = os.path.join(path, "data.mdb")
    fd = os.open(data, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
order = list(range(count))
random.Random(1).shuffle(order)
out = {}
if kind == "pylmdb":
    import lmdb
    env = lmdb.open(path, readonly=True, lock=False)
    keys = [b"%08d" % i for i in order]
    if cold == "1": evict()
    t = time.perf_counter()
    with env.begin(buffers=False) as txn:
        for k in keys: txn.get(k)
    out["single"] = count / (time.perf_counter() - t)
    out["batch"] = out["single"]
else:
    import lmdbloader
    r = lmdbloader.Reader(path, index_dir=temp)
    r.get_batch(order[:64])
    if cold == "1": evict()
    t = time.perf_counter()
    for s in range(0, count, 64): r.get_batch(order[s:s + 64])
    out["batch"] = count / (time.perf_counter() - t)
    if cold == "1": evict()
    t = time.perf_counter()
    for i in order: r[i]
    out["single"] = count / (time.perf_counter() - t)
print(json.dumps(out))
"""


def make(dirname, size, count):
    path = os.path.join(dirname, f"db-{size}")
    if os.path.exists(os.path.join(path, "data.mdb")):
        return path
    import lmdb
    env = lmdb.open(path, map_size=count * (size + 8192) + (64 << 20))
    rnd = random.Random(size)
    with env.begin(write=True) as txn:
        for i in range(count):
            txn.put(b"%08d" % i, rnd.randbytes(size))
    env.close()
    return path


def run(kind, package, path, size, count, temp, cold):
    env = dict(os.environ)
    if package:
        env["PYTHONPATH"] = package + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", RUN, kind, path, str(size), str(count), temp, "1" if cold else "0"],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", required=True, help="another build's tree-package folder (the package to compare)")
    ap.add_argument("--dir", default="/var/tmp/lmdbloader-change-bench")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    variants = {"this tree": os.path.realpath(TREE), "baseline build": a.baseline, "py-lmdb": None}
    rows = []
    for name, (size, count) in SIZES.items():
        path = make(a.dir, size, count)
        for cold in (False, True):
            got = {v: {"batch": [], "single": []} for v in variants}
            for _ in range(a.rounds):
                for v, package in variants.items():
                    temp = os.path.join(a.dir, "index-" + v.replace(" ", "-"))
                    res = run("pylmdb" if package is None else "lmdbloader", package, path, size, count, temp, cold)
                    for k in res:
                        got[v][k].append(res[k])
            med = {v: {k: statistics.median(x) for k, x in got[v].items()} for v in variants}
            for k in ("batch", "single"):
                rows.append((name, "cold" if cold else "warm", k, med["this tree"][k], med["baseline build"][k],
                             med["py-lmdb"][k]))
    print(f"{'records':8} {'cache':5} {'read':7} {'this tree/s':>12} {'baseline/s':>12} {'ratio':>6} {'x py-lmdb':>9}")
    for name, cache, k, new, old, base in rows:
        print(f"{name:8} {cache:5} {k:7} {new:12,.0f} {old:12,.0f} {new / old:6.3f} {new / base:9.2f}")


if __name__ == "__main__":
    main()
