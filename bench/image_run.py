"""One (recipe, variant) run of the image bench, in a process of its own so
that no variant's libraries or arenas count in another's figures:
``python3 bench/image_run.py SPEC.json`` reads the spec the parent wrote
(:func:`run_one`) and writes its figures beside it."""

import gc
import json
import os
import pickle
import statistics
import subprocess
import sys
import threading
import time
import warnings

from batch_probes import dev_shm_used, touch
from image_coclr import CoclrDataset, CoclrDecode, coclr_dataset
from image_dali import dali_iterator
from image_recipes import RECIPES, PyLmdbDataset, TorchvisionDecode, fused_decode, pickle_keys


def dev_shm_held(pids):
    """Bytes of the /dev/shm files that ``pids`` hold open, each file once.
    default_collate's segments are unlinked as soon as they are made, and
    under torch's sharing strategy on Linux ("file_descriptor") every process
    holding one keeps a descriptor of it: they are found through /proc/PID/fd
    (a scan of the descriptors costs about 1 ms; the mappings, 15)."""
    sizes = {}
    for pid in pids:
        try:
            fds = list(os.scandir(f"/proc/{pid}/fd"))
        except OSError:  # gone meanwhile
            continue
        for fd in fds:
            try:
                if os.readlink(fd.path).startswith("/dev/shm/"):
                    st = os.stat(fd.path)
                    sizes[st.st_ino] = st.st_size
            except OSError:
                pass
    return sum(sizes.values())


def _images_of(batch, recipe):
    """The batch's image (or clip) tensor and its labels (None for DALI's clips)."""
    if isinstance(batch, list) and batch and isinstance(batch[0], dict):  # DALI's iterator
        return batch[0]["data"], batch[0].get("label")
    if isinstance(batch, (list, tuple)) and len(batch) == 2:
        return batch[0], batch[1]
    raise TypeError(f"{recipe}: a batch should be (images, labels), got {type(batch).__name__}")


def _count(images):
    """Samples in a batch's images: a tensor, or one tensor a Crop."""
    return len(images[0]) if isinstance(images, (list, tuple)) else len(images)


def _check_first(batch, recipe, size):
    """Every variant must hand the model the same thing: float32 [B, *shape], B labels."""
    import torch
    images, labels = _images_of(batch, recipe)
    if recipe == "dinov2":  # one tensor a Crop: [B, n, 3, size, size]
        got = [(tuple(v.shape), v.dtype) for v in images] if isinstance(images, (list, tuple)) else type(images)
        if got != [((size,) + shape, torch.float32) for shape in RECIPES[recipe]["shape"]]:
            raise ValueError(f"{recipe}: the first batch should be float32 crops of {RECIPES[recipe]['shape']}, "
                             f"got {got}")
        images = images[0]
    want = (size,) + RECIPES[recipe]["shape"] if recipe != "dinov2" else tuple(images.shape)
    if not isinstance(images, torch.Tensor) or tuple(images.shape) != want or images.dtype != torch.float32:
        got = (tuple(images.shape), images.dtype) if isinstance(images, torch.Tensor) else type(images).__name__
        raise ValueError(f"{recipe}: the first batch should be float32 {list(want)}, got {got}")
    if labels is not None and len(labels) != size:
        raise ValueError(f"{recipe}: the first batch has {len(labels)} labels for {size} samples")


def run_child(spec):
    """Runs one (recipe, variant) and returns its figures."""
    import psutil
    import torch
    import lmdbloader
    from lmdbloader.memory import Sampler

    recipe, variant, paths = spec["recipe"], spec["variant"], spec["paths"]
    batch, workers, epochs = spec["batch"], spec["workers"], spec["epochs"]
    # coclr: every video of the split once an epoch, the last batch short where it must be.
    opts = dict(batch_size=batch, shuffle=True, num_workers=workers, persistent_workers=True,
                drop_last=recipe != "coclr")
    budget = dict(rss_budget=spec["rss_budget"]) if recipe == "coclr" else {}
    ds = None
    if recipe == "coclr" and variant == "pylmdb":
        ds = CoclrDataset(paths)
        loader = torch.utils.data.DataLoader(ds, **opts)
    elif recipe == "coclr" and variant == "lmdb-tv":
        ds = coclr_dataset(paths, CoclrDecode(), **budget)
        loader = torch.utils.data.DataLoader(ds, collate_fn=lmdbloader.collate, **opts)
    elif recipe == "coclr" and variant in ("fused-loader", "fused-collate", "fused-threads"):
        ds = coclr_dataset(paths, fused_decode(recipe), **budget)
        if variant == "fused-collate":
            loader = torch.utils.data.DataLoader(ds, collate_fn=lmdbloader.collate, **opts)
        else:
            threads = dict(worker_method="thread") if variant == "fused-threads" else {}
            loader = lmdbloader.DataLoader(ds, **threads, **opts)
    elif variant == "pylmdb":
        loader = torch.utils.data.DataLoader(PyLmdbDataset(paths["pylmdb"], TorchvisionDecode(recipe, "pylmdb")),
                                             **opts)
    elif variant == "lmdb-tv":
        ds = lmdbloader.LmdbDataset(paths["corpus"], decode=TorchvisionDecode(recipe, "lmdbloader"))
        loader = torch.utils.data.DataLoader(ds, collate_fn=lmdbloader.collate, **opts)
    elif variant == "fused-loader":
        loader = lmdbloader.DataLoader(lmdbloader.LmdbDataset(paths["corpus"], decode=fused_decode(recipe)), **opts)
    elif variant == "fused-threads":
        loader = lmdbloader.DataLoader(lmdbloader.LmdbDataset(paths["corpus"], decode=fused_decode(recipe)),
                                       worker_method="thread", **opts)
    elif variant == "fused-collate":
        ds = lmdbloader.LmdbDataset(paths["corpus"], decode=fused_decode(recipe))
        loader = torch.utils.data.DataLoader(ds, collate_fn=lmdbloader.collate, **opts)
    elif variant == "fused-pickle":
        # py-lmdb's corpus as it is: each record pickle.dumps((jpeg, label)) (clips: ([jpeg, ...],
        # label)) under b"%08d"; keys= leaves b"__len__" out.
        ds = lmdbloader.LmdbDataset(paths["pylmdb"], keys=pickle_keys(paths),
                                    decode=fused_decode(recipe, record=pickle.loads))
        loader = lmdbloader.DataLoader(ds, **opts)
    elif variant == "dali":
        loader = dali_iterator(recipe, paths, batch, workers, seed=spec["seed"])
    else:
        raise ValueError(f"unknown variant {variant!r}")

    from lmdbloader.memory import children
    shm_base, shm_fs_peak, shm_peak = dev_shm_used(), 0, 0
    stop = threading.Event()

    def watch_shm():
        nonlocal shm_fs_peak, shm_peak
        tick = 0
        while not stop.is_set():
            shm_fs_peak = max(shm_fs_peak, dev_shm_used() - shm_base)
            if tick % 5 == 0:  # 10 Hz: each scan reads every descriptor of the job's processes
                me = os.getpid()
                shm_peak = max(shm_peak, dev_shm_held([me] + children(me)))
            tick += 1
            stop.wait(0.02)

    watcher = threading.Thread(target=watch_shm, daemon=True)
    watcher.start()
    # Sparse: reading smaps_rollup costs CPU the job shares. For coclr also the RSS of the
    # data file's mappings (smaps, each process's every sample).
    match = os.path.basename(paths["lmdb"]) if recipe == "coclr" else None
    sampler = Sampler(interval=0.25, match=match)
    t0 = time.monotonic()
    sampler.start()
    seconds, counts, ends, load = [], [], [], [os.getloadavg()[0]]
    for epoch in range(epochs):
        t, n = time.perf_counter(), 0
        for b in loader:
            if epoch == 0 and n == 0:
                _check_first(b, recipe, batch)
            touch(b)
            n += _count(_images_of(b, recipe)[0])
        seconds.append(time.perf_counter() - t)
        counts.append(n)
        ends.append(time.monotonic() - t0)
    load.append(os.getloadavg()[0])
    me = os.getpid()
    workers_now = set()
    for c in psutil.Process(me).children(recursive=True):
        try:  # multiprocessing's resource tracker is no worker
            if "resource_tracker" not in " ".join(c.cmdline()):
                workers_now.add(c.pid)
        except psutil.NoSuchProcess:
            pass
    samples = sampler.stop()
    stop.set()
    watcher.join()
    if variant in ("fused-loader", "fused-pickle"):
        ring = loader.ring_stats()
    elif variant in ("lmdb-tv", "fused-collate"):
        ring = lmdbloader.collate.stats()
    else:
        ring = {}
    del loader
    gc.collect()

    peaks, job = {}, {}
    for s in samples:  # the job: every process of the tree at one sample, summed
        if s["pid"] == me or s["pid"] in workers_now:
            at = job.setdefault(s["time"], [0, 0])
            at[0], at[1] = at[0] + s["rss"], at[1] + s["pss"]
    for s in samples:
        if s["pid"] != me and s["pid"] not in workers_now:
            continue
        key = "main" if s["pid"] == me else str(s["pid"])
        p = peaks.setdefault(key, {"rss_mib": 0.0, "pss_mib": 0.0, "shmem_mib": 0.0})
        p["rss_mib"] = max(p["rss_mib"], s["rss"] / 2**20)
        p["pss_mib"] = max(p["pss_mib"], s["pss"] / 2**20)
        p["shmem_mib"] = max(p["shmem_mib"], s.get("shmem_rss", 0) / 2**20)
        if match:
            p["file_rss_mib"] = max(p.get("file_rss_mib", 0.0), s.get("match_rss", 0) / 2**20)
            # The peak over epoch 1 and over the epochs after: what a persistent worker keeps growing.
            when = "epoch1_rss_mib" if s["time"] <= ends[0] else "later_rss_mib"
            p[when] = max(p.get(when, 0.0), s["rss"] / 2**20)
    rates = [n / s for n, s in zip(counts[1:], seconds[1:])]
    worker_peaks = [v for k, v in peaks.items() if k != "main"]
    extra = {}
    if recipe == "coclr":
        extra = {"samples_per_epoch": len(ds) if ds is not None else None,
                 "rss_budget_mib": (ds.reader.rss_budget / 2**20
                                    if variant != "pylmdb" and ds is not None else None),
                 "worker_peak_file_rss_mib": max((v.get("file_rss_mib", 0.0) for v in worker_peaks), default=None),
                 "worker_growth_mib": max((v.get("later_rss_mib", 0.0) - v.get("epoch1_rss_mib", 0.0)
                                           for v in worker_peaks), default=None)}
        if ds is not None and any(n != len(ds) for n in counts):
            raise ValueError(f"coclr: an epoch gave {counts} videos; the split has {len(ds)}")
    return {**extra, "items_per_s": statistics.median(rates), "epoch_seconds": seconds, "epoch_items": counts,
            "main_peak": peaks.get("main"), "worker_peaks": worker_peaks,
            "job_peak_rss_mib": max((v[0] for v in job.values()), default=0) / 2**20,
            "job_peak_pss_mib": max((v[1] for v in job.values()), default=0) / 2**20,
            "worker_peak_rss_mib": max((v["rss_mib"] for v in worker_peaks), default=None),
            "worker_peak_pss_mib": max((v["pss_mib"] for v in worker_peaks), default=None),
            "dev_shm_peak_mib": shm_peak / 2**20, "dev_shm_fs_peak_mib": shm_fs_peak / 2**20,
            "ring_mib": ring["worker_ring_bytes"] / 2**20 if ring else None,
            "ring": {k: v for k, v in ring.items() if k != "workers"},
            "loadavg_1min": load}


def child_main(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    warnings.filterwarnings("ignore", message="The given buffer is not writable")
    try:
        result = run_child(spec)
    except Exception as e:  # reported in the table, the other variants go on
        import traceback
        traceback.print_exc()
        result = {"error": f"{type(e).__name__}: {e}"}
    with open(spec["result"], "w") as f:
        json.dump(result, f)


def run_one(spec, tmp):
    """Runs ``spec`` in a fresh process (this file as a script); its figures, or {"error": ...}."""
    spec_path = os.path.join(tmp, "spec.json")
    spec = dict(spec, result=os.path.join(tmp, "result.json"))
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    if os.path.exists(spec["result"]):
        os.unlink(spec["result"])
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), spec_path])
    try:
        with open(spec["result"]) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"error": f"the run's process exited with status {proc.returncode} and wrote no result"}


if __name__ == "__main__":
    child_main(sys.argv[1])
