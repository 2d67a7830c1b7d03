"""The first open of a database (the index walk) over an emulated network
file system and on the local disk, cold: lmdbloader with a fresh index_dir
against py-lmdb's open and a cold sequential read of the whole file.

Databases (written once under --dir, reused while their record count and
value size match), both by py-lmdb with 2 KiB values, each on an overflow
page of its own, so leaf pages sit between them as in an image corpus:
- small: 200,000 records, keys b"%08d";
- imagenet: 1,281,167 records (ImageNet-1k's training set), keys shaped as
  its file names, b"n%08d/n%08d_%06d.JPEG" (30 bytes), 5.3 GB.

Per database: the mount (bench/netfs.c: --latency-ms per read request, at
most --in-flight at once) and the local path; each open after
posix_fadvise(DONTNEED) on the data file and the index folder, checked
with mincore (page_cache.evict / netfs.evict). Reports seconds, the read
requests and bytes the mount served, the mean requests in flight, and for
reference py-lmdb's open and a sequential read of the file.

    python3 bench/network_open.py [--dir /var/tmp/lmdbloader-network-open] [--databases small,imagenet]
        [--latency-ms 1] [--in-flight 32] [--repeats 2] [--engine auto]

Needs FUSE (see bench/netfs.py); without it only the local figures print.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import time

import lmdb

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import netfs  # noqa: E402

import lmdbloader  # noqa: E402

DATABASES = {"small": (200_000, 2048, lambda i: b"%08d" % i),
             "imagenet": (1_281_167, 2048, lambda i: b"n%08d/n%08d_%06d.JPEG" % (i // 1300, i // 1300, i % 1300))}


def write(directory, name):
    count, size, key = DATABASES[name]
    path = os.path.join(directory, f"{name}-{count}.lmdb")
    stamp = os.path.join(path, "written.json")
    if os.path.exists(stamp):
        with open(stamp) as f:
            if json.load(f) == {"count": count, "size": size}:
                return path
    shutil.rmtree(path, ignore_errors=True)
    value = os.urandom(size)
    with lmdb.open(path, map_size=count * (size + 4200) + (256 << 20), sync=False) as env:
        done = 0
        while done < count:
            n = min(100_000, count - done)
            with env.begin(write=True) as txn:
                txn.cursor().putmulti(((key(i), value) for i in range(done, done + n)), append=True)
            done += n
        env.sync()
    with open(stamp, "w") as f:
        json.dump({"count": count, "size": size}, f)
    return path


def cold(*paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += [os.path.join(p, f) for f in os.listdir(p) if os.path.isfile(os.path.join(p, f))]
        elif os.path.exists(p):
            files.append(p)
    left = netfs.evict(files)
    if left:
        raise RuntimeError(f"{left} bytes still cached after DONTNEED: {files[:3]}")


def timed(fn, *evict, mount=None):
    cold(*evict)
    before = mount.stats() if mount else None
    start = time.perf_counter()
    value = fn()
    seconds = time.perf_counter() - start
    out = {"seconds": seconds}
    if mount:
        d = mount.delta(before, mount.stats())
        out.update(requests=d["reads"], mb=d["read_bytes"] / 1e6, in_flight=d["busy_s"] / seconds)
    return out, value


def measure(db, backing_db, index_dir, engine, repeats, mount=None):
    data = os.path.join(db, "data.mdb")
    evict = [data] + ([os.path.join(backing_db, "data.mdb")] if mount else [])
    rows = {"lmdbloader first open": [], "py-lmdb open": [], "sequential read": []}
    for _ in range(repeats):
        shutil.rmtree(index_dir, ignore_errors=True)
        os.makedirs(index_dir)
        row, r = timed(lambda: lmdbloader.Reader(db, index_dir=index_dir, io_engine=engine), *evict, mount=mount)
        row["records"] = len(r)
        del r
        rows["lmdbloader first open"].append(row)

        def pylmdb():
            env = lmdb.open(db, readonly=True, lock=False, readahead=False, meminit=False)
            n = env.stat()["entries"]
            env.close()
            return n
        rows["py-lmdb open"].append(timed(pylmdb, *evict, mount=mount)[0])

        def sequential():
            with open(data, "rb", buffering=0) as f:
                while f.read(8 << 20):
                    pass
        rows["sequential read"].append(timed(sequential, *evict, mount=mount)[0])
    return {k: min(v, key=lambda x: x["seconds"]) | {"all_seconds": [x["seconds"] for x in v]}
            for k, v in rows.items()}


def show(where, name, result):
    for what, row in result.items():
        extra = ""
        if "requests" in row:
            extra = f"  {row['requests']:>7,} requests  {row['mb']:8.1f} MB  {row['in_flight']:5.1f} in flight"
        runs = ", ".join(f"{s:.3f}" for s in row["all_seconds"])
        print(f"{where:7} {name:9} {what:22} {row['seconds']:8.3f} s ({runs}){extra}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/var/tmp/lmdbloader-network-open")
    ap.add_argument("--databases", default="small,imagenet")
    ap.add_argument("--latency-ms", type=float, default=1.0)
    ap.add_argument("--in-flight", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--engine", default="auto", help="io_engine for lmdbloader's open")
    ap.add_argument("--local", action=argparse.BooleanOptionalAction, default=True, help="also open locally")
    ap.add_argument("--out", default=os.path.join(HERE, "out", "network_open.json"))
    args = ap.parse_args()
    names = args.databases.split(",")
    unknown = [n for n in names if n not in DATABASES]
    if unknown or args.repeats < 1:
        ap.error(f"unknown databases {unknown} (choose from {', '.join(DATABASES)}); --repeats >= 1")
    os.makedirs(args.dir, exist_ok=True)
    paths = {n: write(args.dir, n) for n in names}
    results = {"argv": sys.argv[1:], "lmdbloader_file": lmdbloader.__file__, "network": {}, "local": {}}
    reason = netfs.unavailable()
    if reason:
        print(f"network_open: no network emulation here ({reason}); local figures only")
    else:
        with netfs.Mount(args.dir, latency_ms=args.latency_ms, in_flight=args.in_flight) as mount:
            for n, p in paths.items():
                db = mount.path(os.path.basename(p))
                r = measure(db, p, os.path.join(args.dir, "index-net", n), args.engine, args.repeats, mount)
                results["network"][n] = r
                show(f"{args.latency_ms:g} ms", n, r)
    if args.local:
        for n, p in paths.items():
            r = measure(p, p, os.path.join(args.dir, "index-local", n), args.engine, args.repeats)
            results["local"][n] = r
            show("local", n, r)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
