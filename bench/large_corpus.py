"""The budget at 100 million records: what the record index costs a process.

A py-lmdb database written the way users write one (keys b"%09d", values of
64 B, 2 KiB or 100 KiB, in several transactions, append=True), then, each
measurement in a fresh subprocess so its memory figures are its own:

1. Corpus: the data file read front to back, cold (evicted with
   posix_fadvise(DONTNEED)) and warm, in MB/s: the yardstick for the walk.
2. Open, per index kind: the first open (empty index_dir: the index is
   built by walking the file; cold and warm data file) in seconds,
   records/s, MB/s of the data file and its ratio to the sequential read
   (measured again at the start of each round, the ratio against that; with
   values on overflow pages, 2 KiB and up, the walk reads only the tree's
   pages and its "data MB/s", the file's size over the time, passes the read);
   later opens (the index loaded from index_dir; cold and warm). For each:
   the process's RSS after the open (/proc/self/statm: resident pages x page
   size), what the open added to it, its peak (VmHWM, /proc/self/status),
   the reader's own count of its index (stats()["index_bytes"]), and the
   open's CPU time (user / system) and minor page faults (getrusage).
3. Reads: --reads random records (seeded), Reader.get_batch in batches of
   --batch, per index kind, against py-lmdb's txn.get loop over the same
   keys (lmdb.open(readonly=True, lock=False, readahead=False)), warm cache.
   records/s (best of --passes; keys and position lists are made outside the
   timed calls, for both), x py-lmdb, x resident (paged / resident), RSS
   after the passes and VmHWM.
4. DataLoader: LmdbDataset(decode="raw", rss_budget=--budget, index_mode=...) +
   lmdbloader.DataLoader, and a py-lmdb Dataset (env opened lazily in each
   worker) + torch's DataLoader; batch --batch, persistent workers, a
   SubsetRandomSampler over --loader-batches x --batch records sampled from
   the file (a RandomSampler over all records would make torch build a
   Python list of every position in the main process: 3.6 GB at 100M).
   --loader-epochs epochs over that sample. The time LmdbDataset takes to
   open in the main process (it loads the index), the time to the first batch
   (from iter(loader): workers forked, each reopening its reader's handles;
   the index comes with the fork from the main process, where LmdbDataset
   opened it), records/s over epochs 2+ (workers up; timed whole, so the
   batches prefetched at iter() count as they should), x py-lmdb at the
   same worker count, each worker's peak RSS (its /proc/<pid>/statm,
   sampled every 20 ms; max and mean over workers), the main process's
   (sampled while the loader runs) and its VmHWM (the index's open included);
   at the end, each worker's PSS and USS (/proc/<pid>/smaps_rollup, mean
   over workers): RSS counts the index that forked workers share
   copy-on-write with the main process in every worker, PSS splits it. A
   configuration that would not fit in the memory available is skipped,
   saying so.

Phases 2-4 run --rounds times, the readers alternating, and report
medians of times and rates (ratios: medians of each round's ratios);
memory figures are the last round's (open) or the largest (DataLoader).

Index kinds: the Reader's ``index_mode=`` option ("resident": the index in
memory, "paged": read from its saved file through a small cache, "auto") is
probed on a tiny database first; where it does not exist yet the bench runs
today's reader alone, labelled "resident (no index option)". A reader whose
index does not fit --budget is refused by lmdbloader (ValueError); the bench
records the refusal and measures that kind again without a budget, marking
the row. Ratios are between figures of the same run, never against numbers
from elsewhere; times are reported, never asserted.

    python3 bench/large_corpus.py --quick                 # 1M records, about a minute
    python3 bench/large_corpus.py --records 10000000      # the sizes measured: 10M and 100M
    python3 bench/large_corpus.py --value-size 2KiB       # 1M records of 2 KiB (4.1 GB)

The database is kept in --dir (default $LMDBLOADER_BENCH_DIR, else
bench/out/large) under a folder named for its parameters, with a marker
file, and reused when present. Writes bench/out/large_corpus-<value>-<records>.json
and prints markdown tables. Exit status 1 when a measurement failed (named
in the "Failures" section); the others still run.
"""

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from page_cache import evict  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
MiB = 2**20
KEY = b"%09d"
LAYOUT = 1  # bump when the way the corpus is written changes: cached corpora are rewritten
VALUE_SIZES = {"64B": 64, "2KiB": 2 << 10, "100KiB": 100 << 10}
# Records by value size: files of a few GB (full runs) and ~100 MB (--quick).
DEFAULT_RECORDS = {64: 10_000_000, 2 << 10: 1_000_000, 100 << 10: 40_000}
QUICK_RECORDS = {64: 1_000_000, 2 << 10: 50_000, 100 << 10: 1_000}
KINDS = ("resident", "paged", "auto")
REFUSED = "smaller than the record index"  # lmdbloader's ValueError when the index exceeds the budget


# --------------------------------------------------------------------------- memory of a process

def statm_rss(pid="self"):
    """Resident bytes of a process: /proc/<pid>/statm's resident pages x page size."""
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE


def pss_uss(pid):
    """(PSS, USS) bytes of a process, from /proc/<pid>/smaps_rollup: RSS counts
    a page shared with the parent (a forked worker's copy-on-write index) in
    every process, PSS splits it, USS is what only this process holds."""
    pss = uss = 0
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name == "Pss":
                pss = int(rest.split()[0]) * 1024
            elif name in ("Private_Clean", "Private_Dirty"):
                uss += int(rest.split()[0]) * 1024
    return pss, uss


def vm_hwm(pid="self"):
    """Peak resident bytes of a process (VmHWM in /proc/<pid>/status)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return None


# --------------------------------------------------------------------------- child side
# Each measurement runs as `large_corpus.py --child SPEC` in a fresh process
# and prints one line "RESULT {json}" last.

def _reader_kwargs(spec):
    kw = {"rss_budget": spec["budget"], "index_dir": spec["index_dir"]}
    if spec["kind"] is not None:
        kw["index_mode"] = spec["kind"]
    return kw


def _open_reader(spec):
    import lmdbloader
    return lmdbloader.Reader(spec["path"], **_reader_kwargs(spec))


def _index_stats(reader):
    st = reader.stats()
    keep = ("index_bytes", "index_source", "index_residence", "index_cache_held", "index_page_reads",
            "index_entry_reads", "index_cache_hits", "cache_policy",
            "io_engine", "mode", "rss_budget", "process_rss", "process_file_rss")
    return {k: st[k] for k in keep if k in st}


def child_probe(spec):
    """Which index kinds the installed Reader accepts, tried on a tiny database."""
    import lmdb
    import lmdbloader
    options = {row[0]: row for row in lmdbloader._core.reader_options()}
    out = {"index_option": list(options["index_mode"][1:]) if "index_mode" in options else None, "kinds": {}}
    with tempfile.TemporaryDirectory(prefix="large-corpus-probe-") as tmp:
        db = os.path.join(tmp, "db")
        with lmdb.open(db, map_size=1 << 20) as env, env.begin(write=True) as txn:
            for i in range(10):
                txn.put(KEY % i, b"v")
        for kind in KINDS:
            try:
                r = lmdbloader.Reader(db, index_mode=kind, index_dir=os.path.join(tmp, f"index-{kind}"))
                ok = len(r) == 10 and r.get_batch([3]) == [b"v"]
                out["kinds"][kind] = "ok" if ok else "opened but read wrong records"
            except Exception as e:  # noqa: BLE001 - the message is the finding
                out["kinds"][kind] = f"{type(e).__name__}: {e}"
    return out


def child_open(spec):
    """One open of the reader; the time, and the process's memory after it."""
    if spec["cold"]:
        evict(spec["path"])
        if os.path.isdir(spec["index_dir"]):
            evict(spec["index_dir"])
    import resource

    import lmdbloader  # noqa: F401 - imported before the baseline RSS is taken
    rss0 = statm_rss()
    u0 = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    r = _open_reader(spec)
    seconds = time.perf_counter() - t
    u1 = resource.getrusage(resource.RUSAGE_SELF)
    rss1 = statm_rss()
    n = len(r)
    last = r.key(n - 1)
    if last != KEY % (n - 1):
        raise AssertionError(f"key of record {n - 1} is {last!r}, expected {KEY % (n - 1)!r}")
    return {"seconds": seconds, "records": n, "rss_before": rss0, "rss_after": rss1, "vm_hwm": vm_hwm(),
            "user_seconds": u1.ru_utime - u0.ru_utime, "sys_seconds": u1.ru_stime - u0.ru_stime,
            "minor_faults": u1.ru_minflt - u0.ru_minflt, "major_faults": u1.ru_majflt - u0.ru_majflt,
            "stats": _index_stats(r)}


def _positions(records, count, seed):
    """`count` positions in random order, distinct while count <= records
    (past that, shuffled passes over every record one after another). Drawn
    without a permutation of every record where the sample is small, which
    numpy's choice(replace=False) makes for samples above 2% of the
    population: 80 MB at 10M records, in the VmHWM of the process measured."""
    import numpy as np
    rng = np.random.default_rng(seed)
    if count * 2 >= records:
        passes = -(-count // records)
        return np.concatenate([rng.permutation(records) for _ in range(passes)])[:count]
    got = np.empty(0, dtype=np.int64)
    while len(got) < count:
        drawn = np.concatenate([got, rng.integers(0, records, size=count - len(got) + count // 8 + 16)])
        _, first = np.unique(drawn, return_index=True)
        got = drawn[np.sort(first)]  # the first occurrence of each, in drawn order
    return got[:count]


def _check_values(positions, values):
    for p, v in zip(positions[:16], values[:16]):
        if v is None or bytes(v[:9]) != KEY % p:
            raise AssertionError(f"record {p}: value starts {bytes(v[:9]) if v else v!r}, expected {KEY % p!r}")


def child_reads(spec):
    """--reads random records in batches, lmdbloader get_batch or py-lmdb txn.get."""
    positions = _positions(spec["records"], spec["reads"], spec["seed"])
    batch = spec["batch"]
    rss0 = statm_rss()
    if spec["impl"] == "py-lmdb":
        import lmdb
        env = lmdb.open(spec["path"], readonly=True, lock=False, readahead=False)
        txn = env.begin()
        get = txn.get

        def read(chunk):
            keys = [KEY % p for p in chunk.tolist()]
            t = time.perf_counter()
            values = [get(k) for k in keys]
            return time.perf_counter() - t, values
        stats = {}
    else:
        import lmdbloader  # noqa: F401
        rss0 = statm_rss()
        r = _open_reader(spec)

        def read(chunk):
            pos = chunk.tolist()
            t = time.perf_counter()
            values = r.get_batch(pos)
            return time.perf_counter() - t, values
    rss_open = statm_rss()
    passes = []
    nbytes = 0
    for k in range(spec["passes"]):
        seconds = 0.0
        for i in range(0, len(positions), batch):
            chunk = positions[i:i + batch]
            dt, values = read(chunk)
            seconds += dt
            if k == 0:
                nbytes += sum(len(v) for v in values)
                if i == 0:
                    _check_values(chunk.tolist(), values)
        passes.append(len(positions) / seconds)
    if spec["impl"] != "py-lmdb":
        stats = _index_stats(r)
    return {"reads": len(positions), "bytes": nbytes, "records_per_s_passes": passes,
            "records_per_s": max(passes), "rss_before": rss0, "rss_opened": rss_open,
            "rss_after": statm_rss(), "vm_hwm": vm_hwm(), "stats": stats}


class _WorkerSampler:
    """Samples the RSS (statm) of this process and of its children, found with psutil."""

    def __init__(self, interval=0.02):
        import psutil
        self._me = psutil.Process()
        self._interval = interval
        self.peak = {}
        self.first = {}
        self.main_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self._interval)

    def sample(self):
        import psutil
        self.main_peak = max(self.main_peak, statm_rss())
        try:
            kids = self._me.children(recursive=True)
        except psutil.Error:
            return
        for kid in kids:
            try:
                rss = statm_rss(kid.pid)
            except OSError:  # gone meanwhile
                continue
            self.first.setdefault(kid.pid, rss)
            self.peak[kid.pid] = max(self.peak.get(kid.pid, 0), rss)

    def stop(self):
        self._stop.set()
        self._thread.join()
        self.sample()


class _PyLmdbRaw:
    """The usual py-lmdb Dataset: the env opened lazily in each worker, one
    read transaction per record, the value's bytes returned."""

    def __init__(self, path, records):
        self.path, self.records, self.env, self.pid = path, records, None, None

    def __len__(self):
        return self.records

    def __getitem__(self, i):
        if self.env is None or self.pid != os.getpid():
            import lmdb
            self.env = lmdb.open(self.path, readonly=True, lock=False, readahead=False, meminit=False)
            self.pid = os.getpid()
        with self.env.begin() as txn:
            return txn.get(KEY % i)


def child_loader(spec):
    """DataLoader: time to the first batch, records/s after it, each worker's peak RSS."""
    import warnings

    import torch
    import torch.utils.data as tud
    # More workers than cores is the point of the 8-worker run; the warning would fill failure notes.
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    # An epoch is a sample of distinct records (all of them in a small corpus).
    sample = _positions(spec["records"], min(spec["records"], spec["batches"] * spec["batch"]), spec["seed"])
    sampler = tud.SubsetRandomSampler(sample.tolist(), generator=torch.Generator().manual_seed(spec["seed"]))
    t = time.perf_counter()
    if spec["impl"] == "py-lmdb":
        ds = _PyLmdbRaw(spec["path"], spec["records"])
        make = tud.DataLoader
    else:
        import lmdbloader
        ds = lmdbloader.LmdbDataset(spec["path"], decode="raw", **_reader_kwargs(spec))
        make = lmdbloader.DataLoader
    open_seconds = time.perf_counter() - t
    loader = make(ds, batch_size=spec["batch"], sampler=sampler, num_workers=spec["workers"],
                  persistent_workers=True)
    mon = _WorkerSampler().start()
    t0 = time.perf_counter()
    it = iter(loader)
    first = next(it)
    first_seconds = time.perf_counter() - t0
    workers = [w.pid for w in getattr(it, "_workers", [])]
    values = list(first)
    if len(values) != spec["batch"] or not all(bytes(v[:9]).isdigit() for v in values):
        raise AssertionError(f"first batch: {len(values)} values, starting {bytes(values[0][:9])!r}")
    n1 = len(values)
    for b in it:  # the rest of epoch 1
        n1 += len(b)
    epoch1_seconds = time.perf_counter() - t0
    # Epochs 2+: the workers are up and their readers open; prefetching starts at iter().
    t1 = time.perf_counter()
    n = 0
    for _ in range(spec["epochs"] - 1):
        for b in loader:
            n += len(b)
    rest_seconds = time.perf_counter() - t1
    hwm, pss, uss = {}, {}, {}
    for pid in workers:
        try:
            hwm[pid] = vm_hwm(pid)
            pss[pid], uss[pid] = pss_uss(pid)
        except OSError:
            pass
    mon.stop()
    del it, loader
    peaks = [mon.peak[p] for p in workers if p in mon.peak]
    return {"open_seconds": open_seconds, "first_batch_seconds": first_seconds,
            "epoch1_seconds": epoch1_seconds, "epoch1_records": n1, "later_epochs_records": n,
            "records_per_s": n / rest_seconds if rest_seconds > 0 else None,
            "worker_peak_rss": peaks, "worker_first_rss": [mon.first[p] for p in workers if p in mon.first],
            "worker_vm_hwm": [hwm[p] for p in workers if p in hwm],
            "worker_pss_end": [pss[p] for p in workers if p in pss],
            "worker_uss_end": [uss[p] for p in workers if p in uss],
            "worker_pss_end_mean": statistics.mean(pss.values()) if pss else None,
            "worker_uss_end_mean": statistics.mean(uss.values()) if uss else None,
            "worker_peak_rss_max": max(peaks) if peaks else None,
            "worker_peak_rss_mean": statistics.mean(peaks) if peaks else None,
            "main_peak_rss": mon.main_peak, "main_vm_hwm": vm_hwm()}


CHILDREN = {"probe": child_probe, "open": child_open, "reads": child_reads, "loader": child_loader}


def child_main(text):
    spec = json.loads(text)
    try:
        result = CHILDREN[spec["phase"]](spec)
    except ValueError as e:
        if REFUSED in str(e):
            result = {"refused": str(e)}
        else:
            raise
    except TypeError as e:
        if "unexpected keyword argument 'index'" in str(e):
            result = {"unavailable": str(e)}
        else:
            raise
    sys.stdout.write("RESULT " + json.dumps(result) + "\n")
    sys.stdout.flush()
    os._exit(0)  # DataLoader workers and io threads are done; skip slow teardown


# --------------------------------------------------------------------------- parent side

_LIVE = set()


def _kill_children(*_):
    for p in list(_LIVE):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _LIVE.clear()


def _on_signal(signum, _frame):
    _kill_children()
    sys.exit(128 + signum)


class Bench:
    def __init__(self, args):
        self.args = args
        self.failures = []
        self.phase_seconds = {}

    def child(self, name, spec, timeout=None):
        """Runs one measurement in a fresh process group; its result dict, or
        {"error": ...} naming what failed (also listed under Failures)."""
        timeout = timeout or self.args.timeout
        cmd = [sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        _LIVE.add(p)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            return self._failed(name, f"timed out after {timeout} s; stderr: {_tail(err)}")
        finally:
            _LIVE.discard(p)
        try:  # workers a crashed child left behind
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        lines = [x for x in out.splitlines() if x.startswith("RESULT ")]
        if p.returncode != 0 or not lines:
            return self._failed(name, f"exit status {p.returncode}; stderr: {_tail(err)}")
        return json.loads(lines[-1][len("RESULT "):])

    def _failed(self, name, why):
        self.failures.append(f"{name}: {why}")
        print(f"  FAILED {name}: {why}", file=sys.stderr, flush=True)
        return {"error": why}

    def budgeted(self, name, spec, fresh_index=False, timeout=None):
        """child() with the budget, and again without one when lmdbloader
        refuses it (the index is larger than the budget); a fresh index_dir
        for the retry when the first open's cost is measured (the refused
        open saved the index it built)."""
        res = self.child(name, spec, timeout)
        if "refused" in res and spec["budget"]:
            refusal = res["refused"]
            if fresh_index:
                shutil.rmtree(spec["index_dir"], ignore_errors=True)
            res = self.child(name + " (no budget)", {**spec, "budget": 0}, timeout)
            res["budget_refused"] = refusal
        return res

    def phase(self, name, fn):
        t = time.perf_counter()
        print(f"== {name}", file=sys.stderr, flush=True)
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - named below, the other phases still run
            self._failed(f"phase {name}", f"{type(e).__name__}: {e}")
            return None
        finally:
            self.phase_seconds[name] = time.perf_counter() - t
            print(f"   {name}: {self.phase_seconds[name]:.1f} s", file=sys.stderr, flush=True)


def _tail(text, lines=6):
    return " | ".join((text or "").strip().splitlines()[-lines:]) or "(empty)"


# --------------------------------------------------------------------------- corpus

def page_estimate(value_size):
    """Bytes of the data file per record (LMDB 0.9, 4 KiB pages, keys of 9 bytes)."""
    node = 8 + 9 + value_size
    if node <= 2040:
        return (node + 1 & ~1) + 2
    return -(-(value_size + 16) // 4096) * 4096 + 8 + 9 + 8 + 2


def write_corpus(db, records, value_size):
    """Keys b"%09d" in order, values of value_size bytes starting with the key
    (so reads can be checked), the rest from a random pool; append=True, a
    transaction per ~256 MiB."""
    import lmdb
    import numpy as np
    pool = np.random.default_rng(0).integers(0, 256, size=(1 << 20) + value_size, dtype=np.uint8).tobytes()
    tail = value_size - 9
    per_txn = max(1, min(2_000_000, (256 * MiB) // value_size))
    map_size = int(records * page_estimate(value_size) * 1.5) + (1 << 30)
    os.makedirs(db)
    with lmdb.open(db, map_size=map_size) as env:
        for start in range(0, records, per_txn):
            stop = min(records, start + per_txn)

            def items(start=start, stop=stop):
                for i in range(start, stop):
                    o = (i * 7919) & 0xFFFFF
                    yield KEY % i, KEY % i + pool[o:o + tail]
            with env.begin(write=True) as txn:
                _, added = txn.cursor().putmulti(items(), append=True)
                if added != stop - start:
                    raise RuntimeError(f"putmulti added {added} of {stop - start} records at {start}")
            if start // per_txn % 10 == 9:
                print(f"   written {stop:,} / {records:,}", file=sys.stderr, flush=True)
        env.sync(True)


def corpus(args):
    """The cached database (written when its marker is missing or differs)."""
    case = os.path.join(args.dir, f"{args.value_label}-{args.records}")
    db, marker = os.path.join(case, "db"), os.path.join(case, "corpus.json")
    params = {"layout": LAYOUT, "records": args.records, "value_size": args.value_size,
              "key_format": KEY.decode()}
    data = os.path.join(db, "data.mdb")
    try:
        with open(marker) as f:
            saved = json.load(f)
        if all(saved.get(k) == v for k, v in params.items()) and os.path.getsize(data) == saved["file_bytes"]:
            return case, db, {**saved, "reused": True}
    except (OSError, ValueError, KeyError):
        pass
    free = shutil.disk_usage(os.path.dirname(case) if os.path.isdir(os.path.dirname(case)) else ".").free
    need = args.records * page_estimate(args.value_size) * 1.2
    if need > free:
        raise RuntimeError(f"the corpus needs about {need / 1e9:.1f} GB, {free / 1e9:.1f} GB free under {args.dir}")
    shutil.rmtree(case, ignore_errors=True)
    os.makedirs(case)
    t = time.perf_counter()
    write_corpus(db, args.records, args.value_size)
    seconds = time.perf_counter() - t
    saved = {**params, "file_bytes": os.path.getsize(data), "write_seconds": seconds,
             "written": time.strftime("%Y-%m-%d %H:%M:%S")}
    with open(marker + ".tmp", "w") as f:
        json.dump(saved, f, indent=1)
    os.replace(marker + ".tmp", marker)
    return case, db, {**saved, "reused": False}


def sequential_read(path, cold):
    """MB/s of reading the file front to back (8 MiB reads into one buffer)."""
    if cold:
        evict(path)
    buf = bytearray(8 * MiB)
    total = 0
    t = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(buf)
            if not n:
                break
            total += n
    seconds = time.perf_counter() - t
    return {"bytes": total, "seconds": seconds, "mb_per_s": total / seconds / 1e6}


# --------------------------------------------------------------------------- phases

def probe_kinds(bench):
    res = bench.child("probe index kinds", {"phase": "probe"}, timeout=120)
    if "error" in res:
        return res, [("resident (no index option)", None)]
    if res["index_option"] is None:
        return res, [("resident (no index option)", None)]
    kinds = [(k, k) for k in KINDS if res["kinds"].get(k) == "ok"]
    return res, kinds or [("resident (no index option)", None)]


def open_phase(bench, db, kinds, case, data_file, seq):
    """--rounds rounds; in each, for each kind: the first open (the index
    built; cold, then warm) and later opens (the index loaded; cold, warm)."""
    args = bench.args
    rows, budgets = [], {}
    for r in range(args.rounds):
        # The yardstick again each round: a device shared with other jobs
        # moved it between 400 and 770 MB/s cold from one run to the next.
        if r:
            seq["rounds"].append({"cold": sequential_read(data_file, cold=True),
                                  "warm": sequential_read(data_file, cold=False)})
        yardstick = seq["rounds"][r]
        for label, kind in kinds:
            tag = kind or "today"
            canonical = os.path.join(case, "index", tag)
            budget = 0 if label in budgets else args.budget_bytes
            for open_, cache in (("first", "cold"), ("first", "warm"), ("later", "cold"), ("later", "warm")):
                cold = cache == "cold"
                if open_ == "first":
                    # An empty index_dir: the index is built from the file. The
                    # warm one stays as the saved index the later opens load.
                    index_dir = canonical if not cold else os.path.join(case, "index-first", tag)
                    shutil.rmtree(index_dir, ignore_errors=True)
                    os.makedirs(index_dir)
                else:
                    index_dir = canonical
                if not cold:
                    sequential_read(data_file, cold=False)
                spec = {"phase": "open", "path": db, "kind": kind, "budget": budget, "index_dir": index_dir,
                        "cold": cold}
                name = f"open round {r + 1}, {label}, {open_}, {cache}"
                res = bench.budgeted(name, spec, fresh_index=open_ == "first")
                if res.get("budget_refused"):
                    budget = 0  # later measurements of this kind go without the budget at once
                    budgets[label] = res["budget_refused"]
                row = {"round": r, "kind": label, "open": "first (index built)" if open_ == "first" else
                       "later (index loaded)", "cache": cache, "budget": budget, **res}
                if "seconds" in row:
                    row["records_per_s"] = row["records"] / row["seconds"]
                    row["data_mb_per_s"] = seq["file_bytes"] / row["seconds"] / 1e6
                    row["x_sequential_read"] = row["data_mb_per_s"] / yardstick[cache]["mb_per_s"]
                rows.append(row)
                if open_ == "first" and cold:
                    shutil.rmtree(index_dir, ignore_errors=True)
    return rows, budgets


def summarize_open(rows, args):
    """Per (kind, open, cache): median time and rates over rounds; memory
    figures from the last round (they repeat within a few pages)."""
    out = []
    for key in dict.fromkeys((r["kind"], r["open"], r["cache"]) for r in rows):
        mine = [r for r in rows if (r["kind"], r["open"], r["cache"]) == key]
        ok = [r for r in mine if "seconds" in r]
        if not ok:
            out.append({"kind": key[0], "open": key[1], "cache": key[2],
                        "note": mine[-1].get("error") or mine[-1].get("unavailable") or "not run"})
            continue
        last = ok[-1]
        s = {"kind": key[0], "open": key[1], "cache": key[2], "rounds": len(ok),
             "budget": _budget_note(next((r for r in ok if r.get("budget_refused")), last), args)}
        for k in ("seconds", "records_per_s", "data_mb_per_s", "x_sequential_read", "user_seconds",
                  "sys_seconds", "minor_faults"):
            s[k] = statistics.median(r[k] for r in ok)
        for k in ("rss_before", "rss_after", "vm_hwm"):
            s[k] = last[k]
        s["index_bytes"] = last["stats"].get("index_bytes")
        out.append(s)
    return out


def reads_phase(bench, db, kinds, case, data_file, budgets):
    args = bench.args
    rounds = []
    for r in range(args.rounds):
        sequential_read(data_file, cold=False)  # warm cache
        row = {}
        base = {"phase": "reads", "path": db, "records": args.records, "reads": args.reads, "seed": args.seed,
                "batch": args.batch, "passes": args.passes}
        row["py-lmdb"] = bench.child(f"reads round {r + 1}, py-lmdb", {**base, "impl": "py-lmdb"})
        for label, kind in kinds:
            budget = 0 if label in budgets else args.budget_bytes
            spec = {**base, "impl": "lmdbloader", "kind": kind, "budget": budget,
                    "index_dir": os.path.join(case, "index", kind or "today")}
            row[label] = bench.budgeted(f"reads round {r + 1}, {label}", spec)
            row[label]["budget"] = budget
        rounds.append(row)
    return rounds


def index_peak(open_rows, label):
    """Bytes the open of this kind's saved index took at its peak (VmHWM less
    the RSS before it), from the warm later open."""
    for row in open_rows or []:
        if (row["kind"] == label and row["open"].startswith("later") and row["cache"] == "warm"
                and "vm_hwm" in row):
            return max(row["vm_hwm"] - row["rss_before"], row["stats"].get("index_bytes", 0))
    return None


def loader_phase(bench, db, kinds, case, data_file, budgets, open_rows):
    """--rounds rounds; in each, for each worker count, py-lmdb then every kind."""
    import psutil
    args = bench.args
    rows = []
    for r in range(args.rounds):
        sequential_read(data_file, cold=False)
        for workers in args.workers:
            base = {"phase": "loader", "path": db, "records": args.records, "seed": args.seed,
                    "batch": args.batch, "batches": args.loader_batches, "epochs": args.loader_epochs,
                    "workers": workers}
            name = f"DataLoader round {r + 1}, py-lmdb, {workers} workers"
            rows.append({"round": r, "reader": "py-lmdb", "workers": workers,
                         **bench.child(name, {**base, "impl": "py-lmdb"})})
            for label, kind in kinds:
                budget = 0 if label in budgets else args.budget_bytes
                # The main process opens the reader; forked workers share its
                # index copy-on-write (RSS counts it in each, memory holds it
                # once): the open's peak, plus ~400 MiB a worker, must fit.
                peak = index_peak(open_rows, label)
                available = psutil.virtual_memory().available
                need = (peak or 0) + workers * 400 * MiB + (1 << 30)
                if need > 0.8 * available:
                    why = (f"skipped: needs about {need / 2**30:.1f} GiB (the index's open peak "
                           f"{(peak or 0) / MiB:.0f} MiB, {workers} workers), more than 80% of the "
                           f"{available / 2**30:.1f} GiB available")
                    rows.append({"round": r, "reader": label, "workers": workers, "skipped": why})
                    print(f"  {label}, {workers} workers: {why}", file=sys.stderr, flush=True)
                    continue
                spec = {**base, "impl": "lmdbloader", "kind": kind, "budget": budget,
                        "index_dir": os.path.join(case, "index", kind or "today")}
                res = bench.budgeted(f"DataLoader round {r + 1}, {label}, {workers} workers", spec)
                rows.append({"round": r, "reader": label, "workers": workers, "budget": budget, **res})
    return rows


# --------------------------------------------------------------------------- tables

def _f(x, fmt="{:,.0f}"):
    return "-" if x is None else fmt.format(x)


def _mib(x):
    return "-" if x is None else f"{x / MiB:,.0f}"


def _budget_note(row, args):
    if row.get("budget_refused"):
        return f"none ({args.budget} refused)"
    return args.budget if row.get("budget", args.budget_bytes) else "none"


def print_tables(args, report):
    p = print
    m = report["machine"]
    p(f"\n## Large corpus: {args.records:,} records of {args.value_label}\n")
    p(f"Machine: {m['cpus']} CPUs, {m['mem_total'] / 2**30:.1f} GiB memory ({m['mem_available'] / 2**30:.1f} GiB "
      f"available at start), {m['kernel']}; Python {m['python']}, lmdbloader {m['lmdbloader']}, "
      f"py-lmdb {m['lmdb']}, torch {m['torch']}. Load average at the start {m['load_average'][0]:.2f}, "
      f"at the end {report['load_average_end'][0]:.2f} (the machine may be shared: compare within a run).")
    probe = report.get("probe") or {}
    if probe.get("index_option") is None:
        p("Index kinds: the Reader has no `index` option yet; measured: today's resident index only.")
    else:
        p("Index kinds: " + ", ".join(f"{k}: {v}" for k, v in probe.get("kinds", {}).items()) + ".")
    c = report.get("corpus")
    if c:
        p("\n| corpus | file | written | sequential read cold (median) | warm |\n|---|---|---|---|---|")
        seq = {cache: statistics.median(x[cache]["mb_per_s"] for x in report["sequential"]["rounds"])
               for cache in ("cold", "warm")} if report.get("sequential", {}).get("rounds") else {}
        written = "reused" if c["reused"] else f"{c['write_seconds']:.0f} s"
        p(f"| {c['records']:,} x {args.value_label} | {c['file_bytes'] / 1e9:.2f} GB | {written} | "
          f"{_f(seq.get('cold'))} MB/s | {_f(seq.get('warm'))} MB/s |")
    if report.get("open_summary"):
        p("\n| index | open | cache | budget | seconds | records/s | data MB/s | x seq. read | index MiB "
          "| RSS after MiB | open added MiB | VmHWM MiB | CPU user / sys s | minor faults |")
        p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in report["open_summary"]:
            if "seconds" not in r:
                p(f"| {r['kind']} | {r['open']} | {r['cache']} | | {r['note']} | | | | | | | | | |")
                continue
            first = r["open"].startswith("first")
            p(f"| {r['kind']} | {r['open']} | {r['cache']} | {r['budget']} | {r['seconds']:.3f} | "
              f"{_f(r['records_per_s'])} | {_f(r['data_mb_per_s'])} | "
              f"{_f(r['x_sequential_read'], '{:.2f}') if first else '-'} | "
              f"{_mib(r['index_bytes'])} | {_mib(r['rss_after'])} | "
              f"{_mib(r['rss_after'] - r['rss_before'])} | {_mib(r['vm_hwm'])} | "
              f"{r['user_seconds']:.2f} / {r['sys_seconds']:.2f} | {_f(r['minor_faults'])} |")
    if report.get("reads"):
        p(f"\n| reads ({args.reads:,} random of {args.records:,}, batches of {args.batch}, warm) | budget | records/s "
          f"| x py-lmdb | x resident | RSS after MiB | VmHWM MiB |")
        p("|---|---|---|---|---|---|---|")
        for name, s in report["reads_summary"].items():
            p(f"| {name} | {s['budget']} | {_f(s.get('records_per_s'))} | {_f(s.get('x_pylmdb'), '{:.2f}')} | "
              f"{_f(s.get('x_resident'), '{:.2f}')} | {_mib(s.get('rss_after'))} | {_mib(s.get('vm_hwm'))} |")
    if report.get("loader"):
        epoch = min(args.records, args.loader_batches * args.batch)
        p(f"\n| DataLoader (batch {args.batch}, {epoch:,} records an epoch) | workers | budget "
          f"| dataset open s | first batch s | epochs 2+ records/s | x py-lmdb | x resident "
          f"| worker peak RSS MiB max / mean | worker PSS / USS MiB at end | main RSS MiB peak / VmHWM |")
        p("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in report["loader_summary"]:
            if "first_batch_seconds" not in r:
                p(f"| {r['reader']} | {r['workers']} | | {r['note']} | | | | | | | |")
                continue
            p(f"| {r['reader']} | {r['workers']} | {r['budget']} | {r['open_seconds']:.2f} | "
              f"{r['first_batch_seconds']:.2f} | "
              f"{_f(r['records_per_s'])} | {_f(r.get('x_pylmdb'), '{:.2f}')} | {_f(r.get('x_resident'), '{:.2f}')} | "
              f"{_mib(r['worker_peak_rss_max'])} / {_mib(r['worker_peak_rss_mean'])} | "
              f"{_mib(r['worker_pss_end_mean'])} / {_mib(r['worker_uss_end_mean'])} | "
              f"{_mib(r['main_peak_rss'])} / {_mib(r['main_vm_hwm'])} |")
    p("\n| phase | wall s |\n|---|---|")
    for name, s in report["phase_seconds"].items():
        p(f"| {name} | {s:.1f} |")
    if report["failures"]:
        p("\n### Failures\n")
        for f in report["failures"]:
            p(f"- {f}")


def summarize_reads(rounds, kinds, args):
    """Per reader: median records/s over rounds, and medians of the per-round ratios."""
    out = {}
    labels = ["py-lmdb"] + [label for label, _ in kinds]
    resident = next((label for label, kind in kinds if kind in (None, "resident")), None)
    for label in labels:
        ok = [r for r in rounds if "records_per_s" in r.get(label, {})]
        if not ok:
            out[label] = {"budget": "-"}
            continue
        last = ok[-1][label]
        s = {"records_per_s": statistics.median(r[label]["records_per_s"] for r in ok),
             "rss_after": last["rss_after"], "vm_hwm": last["vm_hwm"],
             "budget": "-" if label == "py-lmdb" else _budget_note(last, args)}
        both = [r for r in ok if "records_per_s" in r.get("py-lmdb", {})]
        if both and label != "py-lmdb":
            s["x_pylmdb"] = statistics.median(r[label]["records_per_s"] / r["py-lmdb"]["records_per_s"]
                                              for r in both)
        both = [r for r in ok if resident and "records_per_s" in r.get(resident, {})]
        if both and label not in ("py-lmdb", resident):
            s["x_resident"] = statistics.median(r[label]["records_per_s"] / r[resident]["records_per_s"]
                                                for r in both)
        out[label] = s
    return out


def summarize_loader(rows, kinds, args):
    """Per (reader, workers): medians over rounds of the time to the first
    batch and of records/s, medians of the per-round ratios, and the memory
    figures at their largest over rounds."""
    resident = next((label for label, kind in kinds if kind in (None, "resident")), None)
    by = {(r["round"], r["reader"], r["workers"]): r for r in rows if r.get("records_per_s")}
    out = []
    for workers in args.workers:
        for label in ["py-lmdb"] + [label for label, _ in kinds]:
            mine = [r for r in rows if r["reader"] == label and r["workers"] == workers]
            ok = [r for r in mine if r.get("records_per_s")]
            if not ok:
                out.append({"reader": label, "workers": workers,
                            "note": next((r.get("skipped") or r.get("error") for r in mine), "not run")})
                continue
            s = {"reader": label, "workers": workers, "rounds": len(ok),
                 "budget": "-" if label == "py-lmdb" else _budget_note(ok[-1], args)}
            for key in ("first_batch_seconds", "records_per_s", "open_seconds"):
                s[key] = statistics.median(r[key] for r in ok)
            for key in ("worker_peak_rss_max", "worker_peak_rss_mean", "worker_pss_end_mean",
                        "worker_uss_end_mean", "main_peak_rss", "main_vm_hwm"):
                values = [r[key] for r in ok if r.get(key) is not None]
                s[key] = max(values) if values else None
            for other, name in (("py-lmdb", "x_pylmdb"), (resident, "x_resident")):
                if other in (None, label) or (label == "py-lmdb"):
                    continue
                ratios = [r["records_per_s"] / by[(r["round"], other, workers)]["records_per_s"]
                          for r in ok if (r["round"], other, workers) in by]
                if ratios:
                    s[name] = statistics.median(ratios)
            out.append(s)
    return out


# --------------------------------------------------------------------------- main

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--records", type=int, help="records in the database (default: 10M for 64 B values, "
                    "1M for 2 KiB, 40k for 100 KiB; --quick: 1M, 50k, 1k)")
    ap.add_argument("--value-size", choices=VALUE_SIZES, default="64B")
    ap.add_argument("--quick", action="store_true", help="1M records, fewer reads and batches: about a minute")
    ap.add_argument("--dir", default=os.environ.get("LMDBLOADER_BENCH_DIR") or os.path.join(HERE, "out", "large"),
                    help="where the database is written and reused ($LMDBLOADER_BENCH_DIR)")
    ap.add_argument("--out", default=os.path.join(HERE, "out"), help="folder of the JSON report")
    ap.add_argument("--budget", default="256MiB", help="rss_budget of every lmdbloader reader")
    ap.add_argument("--reads", type=int, help="random records read per pass (default 1M, --quick 200k, "
                    "at most the corpus's records; more reads each record again)")
    ap.add_argument("--passes", type=int, default=2, help="passes over the reads; the best is reported")
    ap.add_argument("--rounds", type=int, help="rounds of the reads and DataLoader phases, readers "
                    "alternating; medians are reported (default 3; --quick 1)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--workers", default="8,2", help="DataLoader worker counts, comma separated")
    ap.add_argument("--loader-batches", type=int, help="batches in each DataLoader epoch (default 1000; "
                    "--quick 200)")
    ap.add_argument("--loader-epochs", type=int, default=3, help="DataLoader epochs; epochs 2+ are timed")
    ap.add_argument("--phases", default="open,reads,loader", help="which of open,reads,loader to run "
                    "('' writes the corpus and reads it sequentially, nothing more)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=int, help="seconds each measurement may take (default scales "
                    "with --records)")
    args = ap.parse_args(argv)
    args.value_label = args.value_size
    args.value_size = VALUE_SIZES[args.value_size]
    table = QUICK_RECORDS if args.quick else DEFAULT_RECORDS
    args.records = args.records or table[args.value_size]
    # By default no record is read twice in a pass (a few thousand records of 100 KiB: each once).
    args.reads = args.reads or min(args.records, 200_000 if args.quick else 1_000_000)
    args.loader_batches = args.loader_batches or (200 if args.quick else 1000)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.workers = [int(w) for w in args.workers.split(",") if w]
    args.phases = {x for x in args.phases.split(",") if x}
    args.timeout = args.timeout or int(300 + args.records * 6e-6)
    if args.records < 1 or args.reads < 1 or args.passes < 1 or args.rounds < 1 or not args.workers \
            or args.loader_epochs < 2:
        ap.error("--records, --reads, --passes, --rounds and --workers must be positive, "
                 "--loader-epochs at least 2")
    if args.phases - {"open", "reads", "loader"}:
        ap.error(f"unknown phases: {', '.join(sorted(args.phases - {'open', 'reads', 'loader'}))}")
    return args


def machine():
    import lmdb
    import psutil
    import torch

    import lmdbloader
    vm = psutil.virtual_memory()
    return {"cpus": os.cpu_count(), "mem_total": vm.total, "mem_available": vm.available,
            "kernel": f"{platform.system()} {platform.release()}", "python": platform.python_version(),
            "lmdbloader": lmdbloader.__version__, "lmdb": lmdb.__version__, "torch": torch.__version__,
            "load_average": os.getloadavg()}


def main(argv):
    args = parse_args(argv)
    from lmdbloader._options import byte_size
    args.budget_bytes = byte_size(args.budget, "--budget")
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    bench = Bench(args)
    start = time.perf_counter()
    report = {"args": {k: (sorted(v) if isinstance(v, set) else v) for k, v in vars(args).items()},
              "machine": machine()}
    try:
        probe, kinds = probe_kinds(bench)
        report["probe"], report["kinds"] = probe, [label for label, _ in kinds]
        print(f"   index kinds: {', '.join(report['kinds'])}", file=sys.stderr, flush=True)
        made = bench.phase("corpus", lambda: corpus(args))
        if made is None:
            raise SystemExit(1)
        case, db, report["corpus"] = made
        data_file = os.path.join(db, "data.mdb")
        seq = bench.phase("sequential read", lambda: {"cold": sequential_read(data_file, cold=True),
                                                      "warm": sequential_read(data_file, cold=False)})
        # The open phase adds a measurement a round; the corpus table shows their medians.
        seq_info = {"rounds": [seq] if seq else [], "file_bytes": report["corpus"]["file_bytes"]}
        report["sequential"] = seq_info
        budgets = {}
        if "open" in args.phases and seq:
            got = bench.phase("open", lambda: open_phase(bench, db, kinds, case, data_file, seq_info))
            if got:
                report["open"], budgets = got
                report["open_summary"] = summarize_open(report["open"], args)
        if "reads" in args.phases:
            rounds = bench.phase("reads", lambda: reads_phase(bench, db, kinds, case, data_file, budgets))
            if rounds:
                report["reads"] = rounds
                report["reads_summary"] = summarize_reads(rounds, kinds, args)
        if "loader" in args.phases:
            rows = bench.phase("DataLoader", lambda: loader_phase(bench, db, kinds, case, data_file, budgets,
                                                                  report.get("open")))
            if rows:
                report["loader"] = rows
                report["loader_summary"] = summarize_loader(rows, kinds, args)
    finally:
        _kill_children()
        bench.phase_seconds["total"] = time.perf_counter() - start
        report["phase_seconds"], report["failures"] = bench.phase_seconds, bench.failures
        report["load_average_end"] = os.getloadavg()
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, f"large_corpus-{args.value_label}-{args.records}.json")
        with open(path, "w") as f:
            json.dump(report, f, indent=1)
    print_tables(args, report)
    print(f"\nwrote {path}")
    return 1 if bench.failures else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child_main(sys.argv[2])
    sys.exit(main(sys.argv[1:]))
