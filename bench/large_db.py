"""The large-corpus bench's database (bench/large_corpus.py): written as
users write one with py-lmdb, cached under a folder named for its
parameters, and read front to back as the yardstick of the index walk."""

import json
import os
import shutil
import sys
import time

from page_cache import evict

MiB = 2**20
KEY = b"%09d"
LAYOUT = 1  # bump when the way the corpus is written changes: cached corpora are rewritten


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
