"""Atomistic corpora: the cost per record of samples="deepmd" and
samples="aselmdb" against the owners' own readers, in the same run.

Writes, with the owners' writers, a deepmd/lmdb database (dpdata's
dump_systems; --frames frames of 64-192 atoms in 8 systems) and an .aselmdb
(ASE's LMDB backend; --rows rows of 20-80 atoms, 1% deleted), then measures,
each the median of --rounds rounds, over one random order of every record:

- open: LmdbDataset(samples=...) against DeePMD-kit's LmdbDataReader and
  ase_db_backends' LMDBDatabase, with the Python memory each holds after
  (tracemalloc; LMDBDatabase's list of ids grows with the rows);
- read: random batches of 256 through ``__getitems__`` against the owners'
  per-record reads (``LmdbDataReader[i]``; ``LMDBDatabase._get_row_by_index``,
  fairchem's path), microseconds a record;
- sizes (aselmdb; deepmd's both come from frame_nlocs): the atoms of every
  row, ours one pass over the rows' first bytes (then saved), against
  reading each row whole.

    python bench/atomistic_bench.py [--dir /var/tmp/lmdbloader-atomistic] [--frames 20000]
        [--rows 5000] [--rounds 3]

Prints one JSON object: per layout the figures and ours / theirs ratios.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import time
import tracemalloc

HERE = os.path.dirname(os.path.abspath(__file__))
TREE = os.path.join(HERE, "..", "build", "tree-package")
if os.path.isdir(TREE):
    sys.path.insert(0, TREE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

import numpy as np  # noqa: E402

import lmdbloader  # noqa: E402
from atomistic_corpora import ase_reader, deepmd_reader, write_aselmdb, write_deepmd  # noqa: E402

BATCH = 256


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def held(fn):
    """(seconds, Python bytes still held after, the value) of fn()."""
    tracemalloc.start()
    seconds, value = timed(fn)
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return seconds, current, value


def per_record(seconds, count):
    return round(seconds / count * 1e6, 2)


def measure(name, path, count, ours_open, theirs_open, theirs_read, theirs_size, rounds):
    order = np.random.default_rng(0).permutation(count)
    runs = {k: [] for k in ("open_ours", "open_theirs", "read_ours", "read_theirs", "sizes_ours",
                            "sizes_theirs")}
    held_bytes = {}
    for _ in range(rounds):
        seconds, held_bytes["ours"], ds = held(ours_open)
        runs["open_ours"].append(seconds)
        seconds, held_bytes["theirs"], reader = held(theirs_open)
        runs["open_theirs"].append(seconds)
        runs["read_ours"].append(timed(lambda: [ds.__getitems__(order[k:k + BATCH].tolist())
                                                for k in range(0, count, BATCH)])[0])
        runs["read_theirs"].append(timed(lambda: [theirs_read(reader, int(i)) for i in order])[0])
        if theirs_size is not None:
            cache = os.path.join(os.path.dirname(path), f"cache-{name}")
            shutil.rmtree(cache, ignore_errors=True)
            fresh = lmdbloader.LmdbDataset(path, samples=name, index_dir=cache)
            runs["sizes_ours"].append(timed(fresh.sizes)[0])
            runs["sizes_theirs"].append(timed(lambda: [theirs_size(reader, i) for i in range(count)])[0])
        del ds, reader
    median = {k: statistics.median(v) for k, v in runs.items() if v}
    out = {"records": count, "file_mib": round(_data_size(path) / 2 ** 20, 1),
           "open_s": {"ours": round(median["open_ours"], 4), "theirs": round(median["open_theirs"], 4)},
           "python_bytes_held_per_record": {k: round(v / count, 1) for k, v in held_bytes.items()}}
    for what in ("read", "sizes") if theirs_size is not None else ("read",):
        ours, theirs = per_record(median[f"{what}_ours"], count), per_record(median[f"{what}_theirs"], count)
        out[f"{what}_us_per_record"] = {"ours": ours, "theirs": theirs, "theirs_over_ours": round(theirs / ours, 2)}
    return out


def _data_size(path):
    return os.path.getsize(os.path.join(path, "data.mdb") if os.path.isdir(path) else path)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default="/var/tmp/lmdbloader-atomistic")
    parser.add_argument("--frames", type=int, default=20000)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    per_system = args.frames // 8
    deepmd = write_deepmd(os.path.join(args.dir, "frames.lmdb"), [(per_system, 64 + 16 * k) for k in range(8)])
    frames = per_system * 8
    ase = write_aselmdb(os.path.join(args.dir, "rows.aselmdb"), args.rows, atoms=(20, 80),
                        deleted=range(7, args.rows, 100))
    rows = len(lmdbloader.LmdbDataset(ase, samples="aselmdb", index_dir="none"))
    if deepmd_reader(deepmd) is None:
        sys.exit("deepmd-kit's LmdbDataReader does not import: pip install --no-deps deepmd-kit, and "
                 "array-api-compat and ml_dtypes")
    report = {
        "deepmd": measure(
            "deepmd", deepmd, frames,
            lambda: lmdbloader.LmdbDataset(deepmd, samples="deepmd", index_dir="none"),
            # Both take the sizes from __metadata__'s frame_nlocs.
            lambda: deepmd_reader(deepmd), lambda r, i: r[i], None, args.rounds),
        "aselmdb": measure(
            "aselmdb", ase, rows,
            lambda: lmdbloader.LmdbDataset(ase, samples="aselmdb", index_dir="none"),
            lambda: ase_reader(ase), lambda db, i: db._get_row_by_index(i),
            lambda db, i: len(db._get_row_by_index(i).numbers), args.rounds),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
