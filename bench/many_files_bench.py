"""Sets of 10^4-10^6 small LMDB files read as one dataset under `ulimit -n 256`:
the time to the first batch, and what the open costs the process per file.

The files: copies of one py-lmdb file (subdir=False, one record of 16 bytes,
12 KiB on disk) with the value changed in place, each a valid LMDB of its own
(written once into --dir and kept for later runs; 10^6 files take 12 GB and
several minutes). Each measurement runs in a fresh child process whose
descriptor limit is 256 (RLIMIT_NOFILE), warm page cache:

- lmdbloader: `Reader(folder, index_dir=..., rss_budget=--budget)`; the time
  of the open, then of the first batch (`get_batch` of --batch records from
  position 0) and of one batch at random positions. Three opens: with
  index_dir="none" (the folder listed and every file's meta pages read for
  its count, as every open did before counts were saved: len() and every
  position need them); the first open with a fresh cache folder (the same
  walk, then the counts saved as the set's listing); a later open with that
  cache (the listing read: no member opened until it is read).
- py-lmdb (the baseline, the way a py-lmdb dataset over many files is built
  when the descriptor limit forbids keeping them open): the folder listed,
  every file opened (readonly, lock=False) for `stat()["entries"]`, closed; a
  batch opens the files holding its records and closes them again.
- py-lmdb keeping every environment open, as dataset code does when the file
  count is small: reported with the file at which it fails.

For each: seconds, ratio to py-lmdb's (in the same run), and the child's RSS
growth over the open (/proc/self/statm) per file, and its peak growth
(VmHWM) per file. Times are reported, never asserted.

    python3 bench/many_files_bench.py --files 10000 100000 [--files 1000000]
"""

import argparse
import os
import shutil
import subprocess
import sys
import textwrap
import time

import lmdb

KEY = b"record00"
VALUE = b"file %011d"  # 16 bytes


def write_set(root, count):
    """root/set-COUNT/shard-NNNNNNN.lmdb, file i holding VALUE % i (kept between runs)."""
    folder = os.path.join(root, f"set-{count}")
    done = os.path.join(root, f"set-{count}.done")
    if os.path.exists(done):
        return folder, 0.0
    start = time.perf_counter()
    os.makedirs(folder, exist_ok=True)
    template = os.path.join(root, "template.lmdb")
    env = lmdb.open(template, subdir=False, lock=False, map_size=1 << 20)
    with env.begin(write=True) as txn:
        txn.put(KEY, VALUE % 0)
    env.close()
    with open(template, "rb") as f:
        data = bytearray(f.read())
    os.remove(template)
    at = data.find(VALUE % 0)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    for i in range(count):
        data[at:at + 16] = VALUE % i
        fd = os.open(os.path.join(folder, "shard-%07d.lmdb" % i), flags, 0o644)
        os.write(fd, data)
        os.close(fd)
    # A set as a job finds it: written a while ago (a folder changed within
    # the last second is not trusted to a saved listing).
    past = time.time() - 60
    os.utime(folder, (past, past))
    open(done, "w").close()
    return folder, time.perf_counter() - start


CHILD = textwrap.dedent("""
    import bisect, json, os, random, resource, sys, time
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    kind, folder, batch, budget, index_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def hwm():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM"))

    if kind == "lmdbloader":
        import lmdbloader
    else:
        import lmdb
    before, peak_before = rss(), hwm()
    out = {}
    t0 = time.perf_counter()
    if kind == "lmdbloader":
        r = lmdbloader.Reader(folder, index_dir=index_dir, rss_budget=budget or None)
        out["source"] = r.stats()["index_source"]
        size = len(r)
        out["open_s"] = time.perf_counter() - t0
        out["rss"], out["peak"] = rss() - before, hwm() - peak_before
        first = r.get_batch(range(batch))
        out["first_batch_s"] = time.perf_counter() - t0
        rng = random.Random(0)
        t1 = time.perf_counter()
        r.get_batch(rng.sample(range(size), batch))
        out["random_batch_s"] = time.perf_counter() - t1
    elif kind == "py-lmdb":
        paths = [os.path.join(folder, n) for n in sorted(os.listdir(folder))]
        ends, total = [], 0
        for p in paths:
            env = lmdb.open(p, subdir=False, readonly=True, lock=False)
            total += env.stat()["entries"]
            env.close()
            ends.append(total)
        size = total
        out["open_s"] = time.perf_counter() - t0
        out["rss"], out["peak"] = rss() - before, hwm() - peak_before

        def get_batch(positions):
            by_file = {}
            for k, i in enumerate(positions):
                by_file.setdefault(bisect.bisect_right(ends, i), []).append((k, i))
            values = [None] * len(positions)
            for f, wanted in by_file.items():
                env = lmdb.open(paths[f], subdir=False, readonly=True, lock=False)
                with env.begin() as txn:
                    items = [v for _, v in txn.cursor()]
                env.close()
                for k, i in wanted:
                    values[k] = items[i - (ends[f - 1] if f else 0)]
            return values
        first = get_batch(range(batch))
        out["first_batch_s"] = time.perf_counter() - t0
        rng = random.Random(0)
        t1 = time.perf_counter()
        get_batch(rng.sample(range(size), batch))
        out["random_batch_s"] = time.perf_counter() - t1
    else:  # py-lmdb, every environment kept open
        envs = []
        try:
            for n in sorted(os.listdir(folder)):
                envs.append(lmdb.open(os.path.join(folder, n), subdir=False, readonly=True, lock=False))
            out["open_s"] = time.perf_counter() - t0
        except lmdb.Error as e:
            out["failed"] = f"file {len(envs) + 1}: {type(e).__name__}: {str(e).splitlines()[0][-60:]}"
        print(json.dumps(out))
        sys.exit(0)
    assert first == [b"file %011d" % i for i in range(batch)], "the first batch differs"
    out["records"] = size
    print(json.dumps(out))
""")


def measure(kind, folder, batch, budget, index_dir="none"):
    done = subprocess.run([sys.executable, "-c", CHILD, kind, folder, str(batch), budget, index_dir],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{kind} over {folder} failed:\n{done.stderr[-3000:]}")
    import json
    return json.loads(done.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--dir", default="/tmp/many-files-bench", help="where the sets are written and kept")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--budget", default="64MiB", help="lmdbloader's rss_budget ('' for none)")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    print(f"{'files':>9} {'reader':26} {'open s':>8} {'first batch s':>14} {'x py-lmdb':>9} "
          f"{'random batch s':>15} {'RSS B/file':>11} {'peak B/file':>12}")
    for count in args.files:
        folder, wrote = write_set(args.dir, count)
        if wrote:
            print(f"  (wrote {count} files in {wrote:.1f} s)")
        base = measure("py-lmdb", folder, args.batch, args.budget)
        ours = measure("lmdbloader", folder, args.batch, args.budget)
        cache = os.path.join(args.dir, f"cache-{count}")
        shutil.rmtree(cache, ignore_errors=True)
        first = measure("lmdbloader", folder, args.batch, args.budget, cache)
        listed = measure("lmdbloader", folder, args.batch, args.budget, cache)
        assert "saved to" in first["source"] and "saved listing" in listed["source"], (first, listed)
        listing = sum(os.path.getsize(os.path.join(cache, n)) for n in os.listdir(cache) if n.endswith(".lst"))
        kept = measure("py-lmdb-kept", folder, args.batch, args.budget)
        for label, m in (("lmdbloader, index_dir=none", ours), ("lmdbloader, 1st, saves", first),
                         ("lmdbloader, from listing", listed), ("py-lmdb, open/stat/close", base)):
            ratio = m["first_batch_s"] / base["first_batch_s"]
            print(f"{count:>9} {label:26} {m['open_s']:8.3f} {m['first_batch_s']:14.3f} {ratio:9.2f} "
                  f"{m['random_batch_s']:15.4f} {m['rss'] / count:11.0f} {m['peak'] / count:12.0f}")
        kept_text = kept.get("failed") or f"opened all in {kept['open_s']:.3f} s"
        print(f"{count:>9} {'py-lmdb, envs kept open':26} {kept_text}")
        print(f"{count:>9} {'saved listing':26} {listing} bytes, {listing / count:.0f} B/file")


if __name__ == "__main__":
    main()
