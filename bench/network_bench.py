"""Cold DataLoader jobs over an emulated network file system: lmdbloader
against py-lmdb and against one file per record, all read through
bench/netfs.c (FUSE: a round trip added to every read request, at most N
requests in flight, optionally a link's bandwidth), which counts the
requests and bytes each job moved.

Corpora (written once under --dir as NAME-COUNT, reused while their
manifest matches):
- large: 6,000 records of 60-160 KB (sizes uniform, seeded), batch 32;
- small: 200,000 records of 2 KiB, batch 256;
each as a py-lmdb database (NAME-COUNT.lmdb/data.mdb, keys b"%08d") and as
one file per record beside it (NAME-COUNT.raw/0000/00000000.bin, 1,000 a
folder).

Settings: --latency-ms per request with --in-flight requests at most; then
the same with a link of --bandwidth MB/s (0: skip). One mount per setting.

Per setting and corpus, a RandomSampler over a third of the records and one
over all (an epoch), 2 and 8 workers, each variant one cold job:
- pylmdb-nora: py-lmdb, readahead=False (MDB_NORDAHEAD), lock=False;
- pylmdb-ra: py-lmdb, readahead=True, lock=False;
- raw-files: open, read, close per record;
- lmdbloader: LmdbDataset(decode="raw"), default options, through
  lmdbloader.DataLoader (which tells the reader the sampler's share: a
  whole epoch fills chunks, a third reads exactly) (its saved index in
  a local --dir/index folder, written by the open measurement);
- lmdbloader-exact: the same with cache="exact";
- lmdbloader-fill (only when named in --variants): cache="fill", 2 MiB
  chunks read whole on first touch.
Every worker returns only (record id, length) (collate_fn), checked against
the sampler's order and the record's size, so no job ships record bytes to
the main process. "Cold": before each job the files the variant reads are
dropped from the page cache with posix_fadvise(DONTNEED) through the mount
AND in the backing directory, and mincore must then count 0 cached bytes on
both sides (/proc/sys/vm/drop_caches is not used: it is not writable in this
container, and would drop the cache of everyone on the machine). A job
stops at --job-seconds (marked capped; its rate is over what it read).

Also, per setting: the first open of each database through lmdbloader with a
fresh index_dir (the index walk runs), a later open (saved index), and
py-lmdb's open, all cold, with the requests and bytes each moved; and
Reader.stats()'s io_engine and cache_policy after one batch.

    python3 bench/network_bench.py [--quick] [--dir /var/tmp/lmdbloader-network-bench]
        [--latency-ms 1] [--in-flight 32] [--bandwidth 117] [--rounds 1] [--job-seconds 30]
        [--workers 2,8] [--corpora large,small] [--variants ...] [--out bench/out]

Prints markdown tables; writes bench/out/network_bench[-quick].json (--name
to choose). Needs root or FUSE rights, gcc and libfuse3-dev (apt-get install
-y fuse3 libfuse3-dev); netfs.c is compiled into --out on first use.
"""

import argparse
import functools
import json
import os
import platform
import shutil
import statistics
import struct
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import netfs  # noqa: E402

CORPORA = {"large": {"count": 6000, "sizes": (60_000, 160_000), "batch": 32},
           "small": {"count": 200_000, "sizes": (2048, 2048), "batch": 256}}
QUICK_COUNTS = {"large": 600, "small": 20_000}
VARIANTS = ("pylmdb-nora", "pylmdb-ra", "raw-files", "lmdbloader", "lmdbloader-exact")
EXTRA_VARIANTS = ("lmdbloader-fill",)  # run only when named in --variants
BASELINES = ("pylmdb-nora", "pylmdb-ra", "raw-files")
SEED = 20261128


# ---------------------------------------------------------------- corpora

def record_bytes(i, size, pool):
    """Record i: its id and size, then bytes of a random pool."""
    at = (i * 7919) % (len(pool) - size)
    return struct.pack("<QQ", i, size) + pool[at + 16:at + size]


def raw_path(root, i):
    return os.path.join(root, f"{i // 1000:04d}", f"{i:08d}.bin")


def stem(name, count):
    """Where a corpus lies under --dir: by name and count, so that --quick's
    smaller corpora never replace the full ones."""
    return f"{name}-{count}"


def write_corpus(directory, name, count, lo, hi):
    """STEM.lmdb (py-lmdb) and STEM.raw (a file per record) under directory,
    STEM = stem(name, count); returns the record sizes. Skipped when
    STEM.json (written last) says they are written."""
    import lmdb
    sizes = np.random.default_rng(SEED + count).integers(lo, hi + 1, count).astype(np.int64)
    manifest = {"count": count, "lo": lo, "hi": hi, "seed": SEED, "bytes": int(sizes.sum())}
    base = os.path.join(directory, stem(name, count))
    if os.path.exists(base + ".json"):
        with open(base + ".json") as f:
            if json.load(f) == manifest:
                return sizes
        os.unlink(base + ".json")
    os.makedirs(directory, exist_ok=True)
    db, raw = base + ".lmdb", base + ".raw"
    for p in (db, raw):
        if os.path.exists(p):
            shutil.rmtree(p)
    pool = np.random.default_rng(SEED).integers(0, 256, 4 << 20, dtype=np.uint8).tobytes()
    print(f"writing {stem(name, count)}: {manifest['bytes'] / 1e6:.0f} MB of records, py-lmdb and raw files ...",
          flush=True)
    env = lmdb.open(db, map_size=int(sizes.sum()) + count * 8192 + (256 << 20), sync=False)
    for start in range(0, count, 10_000):
        with env.begin(write=True) as txn:
            for i in range(start, min(count, start + 10_000)):
                txn.put(b"%08d" % i, record_bytes(i, int(sizes[i]), pool), append=True)
    env.sync(True)
    env.close()
    for i in range(count):
        path = raw_path(raw, i)
        if i % 1000 == 0:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(record_bytes(i, int(sizes[i]), pool))
    os.sync()
    with open(base + ".json", "w") as f:
        json.dump(manifest, f)
    return sizes


# ---------------------------------------------------------------- datasets

class PyLmdbRecords:
    """py-lmdb as training code opens it: lazily in each worker, a txn.get per record."""

    def __init__(self, path, count, readahead):
        self.path, self.count, self.readahead, self.env = path, count, readahead, None

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        if self.env is None:
            import lmdb
            self.env = lmdb.open(self.path, readonly=True, lock=False, readahead=self.readahead, meminit=False)
        with self.env.begin() as txn:
            return txn.get(b"%08d" % i)


class RawFiles:
    """One file per record: open, read, close."""

    def __init__(self, root, count):
        self.root, self.count = root, count

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        with open(raw_path(self.root, i), "rb") as f:
            return f.read()


def digest(batch):
    """Runs in the worker: (record id, length) per record, nothing else shipped."""
    return [(struct.unpack_from("<Q", r)[0], len(r)) for r in batch]


# ---------------------------------------------------------------- measurements

class Corpus:
    def __init__(self, name, directory, mount, count, sizes, batch, index_dir):
        self.name, self.count, self.sizes, self.batch = name, count, sizes, batch
        base = stem(name, count)
        self.db = mount.path(base + ".lmdb")
        self.raw = mount.path(base + ".raw")
        self.backing_db = os.path.join(directory, base + ".lmdb", "data.mdb")
        self.backing_raw = os.path.join(directory, base + ".raw")
        self.index_dir = index_dir
        self._raw_files = None

    def raw_files(self, backing):
        """Every record file, through the mount or in the backing directory (listed once, locally)."""
        if self._raw_files is None:
            self._raw_files = [os.path.relpath(p, self.backing_raw) for p in netfs.files_under(self.backing_raw)]
        base = self.backing_raw if backing else self.raw
        return [os.path.join(base, p) for p in self._raw_files]

    def dataset(self, variant):
        import lmdbloader
        if variant == "pylmdb-nora":
            return PyLmdbRecords(self.db, self.count, readahead=False)
        if variant == "pylmdb-ra":
            return PyLmdbRecords(self.db, self.count, readahead=True)
        if variant == "raw-files":
            return RawFiles(self.raw, self.count)
        if variant == "lmdbloader":
            return lmdbloader.LmdbDataset(self.db, decode="raw", index_dir=self.index_dir)
        if variant == "lmdbloader-exact":
            return lmdbloader.LmdbDataset(self.db, decode="raw", index_dir=self.index_dir, cache="exact")
        if variant == "lmdbloader-fill":
            return lmdbloader.LmdbDataset(self.db, decode="raw", index_dir=self.index_dir, cache="fill")
        raise ValueError(variant)


def make_cold(corpus, variant):
    """Drops what the variant reads from the page cache, through the mount and
    in the backing directory; returns the seconds it took and the files
    evicted only on a second try. Raises when mincore still counts cached
    bytes on either side after three tries."""
    start = time.perf_counter()
    stubborn = []
    if variant == "raw-files":
        sides = {"mount": corpus.raw_files(False), "backing": corpus.raw_files(True)}
    else:
        sides = {"mount": [os.path.join(corpus.db, "data.mdb")], "backing": [corpus.backing_db]}
        if os.path.isdir(corpus.index_dir):
            sides["index"] = netfs.files_under(corpus.index_dir)
    for side, files in sides.items():
        # Through FUSE each file costs an open, a flush and a release, round
        # trips to the daemon without added latency: four threads halve it.
        chunks = [files[i::4] for i in range(4)] if len(files) > 1000 else [files]
        with ThreadPoolExecutor(len(chunks)) as pool:
            left = sum(pool.map(functools.partial(netfs.evict, stubborn=stubborn), chunks))
        if left:
            raise RuntimeError(f"{corpus.name} {variant}: {left} bytes still cached ({side}) after DONTNEED "
                               f"three times: {stubborn[:3]}")
    if stubborn:
        print(f"  (evicted only on a second try: {len(stubborn)} files, e.g. {stubborn[:2]})", flush=True)
    return time.perf_counter() - start, stubborn


def _wait_for_start(barrier, worker_id):
    """worker_init_fn: every worker is up before the clock starts."""
    barrier.wait()


def run_job(mount, corpus, variant, order, workers, cap_s):
    """One cold DataLoader pass over `order`; returns its figures. The clock
    starts once every worker has started (forked, worker_init_fn run), so
    that it times reading, not process start-up; each worker's first open of
    the database (py-lmdb's environment, lmdbloader's reopen) is timed."""
    import multiprocessing

    import lmdbloader
    from torch.utils.data import DataLoader
    # lmdbloader's variants through its DataLoader, as its README says to
    # read: it tells the reader the share of the records the sampler reads.
    if variant.startswith("lmdbloader"):
        DataLoader = lmdbloader.DataLoader  # noqa: N806
    dataset = corpus.dataset(variant)  # lmdbloader opens here (its saved index), before the eviction
    evict_s, stubborn = make_cold(corpus, variant)
    barrier = multiprocessing.get_context("fork").Barrier(workers + 1)
    loader = DataLoader(dataset, batch_size=corpus.batch, sampler=order, num_workers=workers, collate_fn=digest,
                        worker_init_fn=functools.partial(_wait_for_start, barrier),
                        multiprocessing_context="fork")
    it = iter(loader)  # forks the workers, which wait
    barrier.wait(timeout=120)
    before = mount.stats()
    load = os.getloadavg()[0]
    start = time.perf_counter()
    first = None
    seen = []
    capped = False
    for batch in it:
        if first is None:
            first = time.perf_counter() - start
        seen.extend(batch)
        if time.perf_counter() - start > cap_s and len(seen) < len(order):
            capped = True
            break
    seconds = time.perf_counter() - start
    del it, loader  # joins the workers: their reads in flight are counted
    moved = mount.delta(before, mount.stats())
    ids = [r[0] for r in seen]
    if ids != order[:len(ids)]:
        raise RuntimeError(f"{variant}: records came back out of the sampler's order")
    bad = [(i, n) for i, n in seen if n != corpus.sizes[i]]
    if bad:
        raise RuntimeError(f"{variant}: record {bad[0][0]} has {bad[0][1]} bytes, "
                           f"{corpus.sizes[bad[0][0]]} expected")
    delivered = int(sum(n for _, n in seen))
    # What cache="auto" chose once told the share (the link probe's 4.2 MiB
    # moved before the clock started, at DataLoader construction).
    chose = {}
    if variant.startswith("lmdbloader"):
        s = dataset.reader.stats()
        chose = {k: s.get(k) for k in ("cache_policy", "read_around", "link_requests_us", "link_bytes_per_s")}
    return {"reader": chose, "records": len(seen), "seconds": seconds, "records_per_s": len(seen) / seconds,
            "mb_per_s": delivered / seconds / 1e6, "first_batch_s": first, "capped": capped,
            "delivered_bytes": delivered, "fuse": moved, "amplification": moved["read_bytes"] / max(delivered, 1),
            "mean_in_flight": moved["busy_s"] / seconds, "evict_s": evict_s, "evicted_on_retry": stubborn, "loadavg_before": load,
            "loadavg_after": os.getloadavg()[0]}


def open_times(mount, corpus, directory):
    """Cold opens through the mount: lmdbloader with a fresh index_dir (the
    walk), lmdbloader again (saved index), py-lmdb; then one batch per cache
    policy, for what Reader.stats() says it chose."""
    import lmdbloader

    import lmdb
    out = {}
    shutil.rmtree(corpus.index_dir, ignore_errors=True)
    os.makedirs(corpus.index_dir)

    def timed(name, fn):
        make_cold(corpus, "lmdbloader")
        before = mount.stats()
        start = time.perf_counter()
        value = fn()
        out[name] = {"seconds": time.perf_counter() - start, "fuse": mount.delta(before, mount.stats())}
        return value

    r = timed("lmdbloader_first_open", lambda: lmdbloader.Reader(corpus.db, index_dir=corpus.index_dir))
    out["lmdbloader_first_open"]["index_source"] = r.stats()["index_source"]
    assert len(r) == corpus.count, (len(r), corpus.count)
    del r
    r = timed("lmdbloader_later_open", lambda: lmdbloader.Reader(corpus.db, index_dir=corpus.index_dir))
    out["lmdbloader_later_open"]["index_source"] = r.stats()["index_source"]
    del r

    def pylmdb_open():
        env = lmdb.open(corpus.db, readonly=True, lock=False, readahead=False, meminit=False)
        entries = env.stat()["entries"]
        assert entries == corpus.count, (entries, corpus.count)
        return env
    env = timed("pylmdb_open", pylmdb_open)
    env.close()

    order = np.random.default_rng(1).permutation(corpus.count)[:corpus.batch].tolist()
    out["stats"] = {}
    for cache in ("auto", "exact"):
        make_cold(corpus, "lmdbloader")
        r = lmdbloader.Reader(corpus.db, index_dir=corpus.index_dir, cache=cache)
        r.get_batch(order)
        s = r.stats()
        out["stats"][cache] = {k: s.get(k) for k in ("file_system", "io_engine", "io_fallback", "queue_depth",
                                                     "cache_policy", "chunks_filled", "read_around", "mode")}
        del r
    return out


# ---------------------------------------------------------------- report

def fmt_rate(v):
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def summarize(jobs):
    """Median of the rounds of one configuration."""
    rates = [j["records_per_s"] for j in jobs]
    mid = sorted(jobs, key=lambda j: j["records_per_s"])[len(jobs) // 2]
    return {"records_per_s": statistics.median(rates), "min": min(rates), "max": max(rates), "job": mid}


def print_tables(results):
    for s in results["settings"]:
        print(f"\n## {s['name']}\n")
        print("First open, cold (page cache of data.mdb and any saved index evicted):\n")
        print("| corpus | lmdbloader, fresh index_dir (walk) | lmdbloader, saved index | py-lmdb open + stat |")
        print("|---|---|---|---|")
        for cname, o in s["open"].items():
            cells = []
            for k in ("lmdbloader_first_open", "lmdbloader_later_open", "pylmdb_open"):
                f = o[k]["fuse"]
                cells.append(f"{o[k]['seconds']:.3f} s ({f['reads']:,} requests, {f['read_bytes'] / 1e6:.1f} MB)")
            print(f"| {cname} | " + " | ".join(cells) + " |")
        print("\nReader.stats() after one batch: " + "; ".join(
            f"{c} cache={k}: io_engine {v['io_engine']}{' (' + v['io_fallback'] + ')' if v['io_fallback'] else ''}, "
            f"cache_policy {v['cache_policy']}" for c, o in s["open"].items() for k, v in o["stats"].items()))
        for cname, grid in s["jobs"].items():
            print(f"\n### {cname} corpus ({results['corpora'][cname]['count']:,} records, "
                  f"{results['corpora'][cname]['bytes'] / 1e6:.0f} MB), batch {results['corpora'][cname]['batch']}\n")
            print("| records | workers | variant | records/s | MB/s | x py-lmdb ra=False | x py-lmdb ra=True | "
                  "x raw files | MB through FUSE | requests | bytes moved / delivered | requests in flight: mean, peak | s |")
            print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
            for key, by_variant in grid.items():
                subset, workers = key.split("/")
                sums = {v: summarize(j) for v, j in by_variant.items()}
                for v, sm in sums.items():
                    j = sm["job"]
                    ratios = []
                    for b in BASELINES:
                        ratios.append(f"{sm['records_per_s'] / sums[b]['records_per_s']:.2f}" if b in sums else "-")
                    spread = (f" ({fmt_rate(sm['min'])}-{fmt_rate(sm['max'])})" if len(by_variant[v]) > 1 else "")
                    cap = " capped" if j["capped"] else ""
                    print(f"| {subset} | {workers} | {v} | {fmt_rate(sm['records_per_s'])}{spread} | "
                          f"{j['mb_per_s']:.0f} | " + " | ".join(ratios) +
                          f" | {j['fuse']['read_bytes'] / 1e6:,.0f} | {j['fuse']['reads']:,} | "
                          f"{j['amplification']:.2f} | {j['mean_in_flight']:.1f}, {j['fuse']['peak_in_flight']} | "
                          f"{j['seconds']:.1f}{cap} |")


# ---------------------------------------------------------------- main

def parse_list(text, allowed=None):
    items = [x for x in text.split(",") if x]
    if allowed is not None:
        unknown = [x for x in items if x not in allowed]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {unknown}; choose from {', '.join(allowed)}")
    return items


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/var/tmp/lmdbloader-network-bench", help="backing directory (corpora)")
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    ap.add_argument("--name", default=None, help="the JSON's name (default network_bench[-quick])")
    ap.add_argument("--quick", action="store_true",
                    help=f"corpora of {QUICK_COUNTS['large']:,} and {QUICK_COUNTS['small']:,} records, "
                         "the latency setting only")
    ap.add_argument("--latency-ms", type=float, default=1.0, help="added to every read request")
    ap.add_argument("--in-flight", type=int, default=32, help="read requests served at once, at most")
    ap.add_argument("--bandwidth", type=float, default=None,
                    help="MB/s of the second setting's link (default 117: 1 GbE; 0: only the latency setting); "
                         "with --quick, run only this setting")
    ap.add_argument("--rounds", type=int, default=1, help="cold jobs per configuration (median reported)")
    ap.add_argument("--job-seconds", type=float, default=30.0,
                    help="a job stops after this (marked capped; its rate is over the records it read)")
    ap.add_argument("--workers", type=lambda t: [int(x) for x in parse_list(t)], default=[2, 8])
    ap.add_argument("--corpora", type=lambda t: parse_list(t, CORPORA), default=list(CORPORA))
    ap.add_argument("--variants", type=lambda t: parse_list(t, VARIANTS + EXTRA_VARIANTS), default=list(VARIANTS))
    ap.add_argument("--subsets", type=lambda t: parse_list(t, ("third", "all")), default=["third", "all"])
    args = ap.parse_args()
    if args.rounds < 1 or args.in_flight < 1 or args.latency_ms < 0 or (args.bandwidth or 0) < 0:
        ap.error("--rounds and --in-flight must be >= 1, --latency-ms and --bandwidth >= 0")
    reason = netfs.unavailable()
    if reason:
        sys.exit(f"network_bench: cannot emulate a network file system here: {reason}")
    netfs.install_signal_cleanup()
    warnings.filterwarnings("ignore", message="This DataLoader will create")  # 8 workers on 2 cores: meant
    binary = netfs.build(args.out)

    import lmdbloader
    import torch
    from torch.utils.data import RandomSampler

    latency = {"name": f"{args.latency_ms:g} ms a request, {args.in_flight} in flight",
               "latency_ms": args.latency_ms, "in_flight": args.in_flight, "bandwidth": None}
    bandwidth = args.bandwidth if args.bandwidth is not None else (0 if args.quick else 117.0)
    link = dict(latency, name=f"{latency['name']}, {bandwidth:g} MB/s", bandwidth=bandwidth * 1e6)
    if args.quick:  # one setting
        settings = [link] if bandwidth else [latency]
    else:
        settings = [latency, link] if bandwidth else [latency]
    corpora = {}
    for name in args.corpora:
        c = CORPORA[name]
        count = QUICK_COUNTS[name] if args.quick else c["count"]
        sizes = write_corpus(args.dir, name, count, *c["sizes"])
        corpora[name] = {"count": count, "bytes": int(sizes.sum()), "batch": c["batch"], "sizes": sizes}

    results = {"argv": sys.argv[1:], "host": platform.node(), "kernel": platform.release(),
               "cpus": os.cpu_count(), "torch": torch.__version__, "lmdbloader": lmdbloader.__version__,
               "lmdbloader_file": lmdbloader.__file__, "eviction": "posix_fadvise(DONTNEED) through the mount and "
               "on the backing files, checked with mincore (0 bytes left on both sides)",
               "corpora": {k: {kk: vv for kk, vv in v.items() if kk != "sizes"} for k, v in corpora.items()},
               "settings": []}
    name = args.name or ("network_bench-quick" if args.quick else "network_bench")
    out_json = os.path.join(args.out, f"{name}.json")
    wall = time.perf_counter()
    for setting in settings:
        print(f"\n== {setting['name']}", flush=True)
        s = dict(setting, open={}, jobs={})
        results["settings"].append(s)
        with netfs.Mount(args.dir, latency_ms=setting["latency_ms"], in_flight=setting["in_flight"],
                         bandwidth=setting["bandwidth"], binary=binary) as mount:
            tag = f"{setting['latency_ms']:g}ms-{setting['in_flight']}-{setting['bandwidth'] or 0:.0f}"
            cs = {name: Corpus(name, args.dir, mount, c["count"], c["sizes"], c["batch"],
                               os.path.join(args.dir, "index", tag, stem(name, c["count"])))
                  for name, c in corpora.items()}
            for name, corpus in cs.items():
                s["open"][name] = open_times(mount, corpus, args.dir)
                o = s["open"][name]
                print(f"open {name}: lmdbloader first {o['lmdbloader_first_open']['seconds']:.3f} s, later "
                      f"{o['lmdbloader_later_open']['seconds']:.3f} s, py-lmdb {o['pylmdb_open']['seconds']:.3f} s; "
                      f"{o['stats']}", flush=True)
            for name, corpus in cs.items():
                grid = s["jobs"].setdefault(name, {})
                for subset in args.subsets:
                    n = corpus.count if subset == "all" else corpus.count // 3
                    order = [int(i) for i in RandomSampler(range(corpus.count), num_samples=n,
                                                           generator=torch.Generator().manual_seed(SEED))]
                    for workers in args.workers:
                        key = f"{subset}/{workers}"
                        by_variant = grid.setdefault(key, {v: [] for v in args.variants})
                        for r in range(args.rounds):
                            k = r % len(args.variants)
                            for v in args.variants[k:] + args.variants[:k]:
                                job = run_job(mount, corpus, v, order, workers, args.job_seconds)
                                by_variant[v].append(job)
                                f = job["fuse"]
                                print(f"{name} {key} {v:16s} {job['records_per_s']:9.1f} rec/s "
                                      f"{job['mb_per_s']:7.1f} MB/s  {f['reads']:8d} req {f['read_bytes'] / 1e6:8.1f}"
                                      f" MB  x{job['amplification']:.2f}  in flight {job['mean_in_flight']:4.1f}<={f['peak_in_flight']:3d}  "
                                      f"{job['seconds']:6.1f} s{' capped' if job['capped'] else ''}  "
                                      f"(evict {job['evict_s']:.1f} s, load {job['loadavg_before']:.1f})",
                                      flush=True)
                        with open(out_json, "w") as fh:
                            json.dump(results, fh, indent=1)
        s["final_fs_stats"] = mount.final_stats
    results["wall_s"] = time.perf_counter() - wall
    with open(out_json, "w") as fh:
        json.dump(results, fh, indent=1)
    print_tables(results)
    print(f"\nwall time {results['wall_s']:.0f} s; wrote {out_json}")


if __name__ == "__main__":
    main()
