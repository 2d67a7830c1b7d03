"""One measurement of the large-corpus bench (bench/large_corpus.py), in a
process of its own so that its memory figures are its own:
``python3 bench/large_child.py SPEC_JSON`` prints one line "RESULT {json}"
last."""

import json
import os
import statistics
import sys
import tempfile
import threading
import time

from large_db import KEY
from page_cache import evict
from proc_memory import pss_uss, statm_rss, vm_hwm

KINDS = ("resident", "paged", "leaves", "auto")
REFUSED = "smaller than the record index"  # lmdbloader's ValueError when the index exceeds the budget


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
            "index_entry_reads", "index_cache_hits", "leaf_page_reads", "leaf_values_read", "leaf_node_reads",
            "cache_policy",
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


if __name__ == "__main__":
    child_main(sys.argv[1])
