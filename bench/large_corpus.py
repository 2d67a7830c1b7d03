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
memory, "paged": read from its saved file through a small cache, "leaves": paged with
a table of the LMDB leaf pages that small values are read out of, "auto") is
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
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from large_db import corpus, sequential_read  # noqa: E402
from large_phases import (  # noqa: E402
    loader_phase, open_phase, probe_kinds, reads_phase, summarize_loader, summarize_open, summarize_reads)
from large_report import print_tables  # noqa: E402
from large_runs import Bench, kill_children, on_signal  # noqa: E402

VALUE_SIZES = {"64B": 64, "2KiB": 2 << 10, "100KiB": 100 << 10}
# Records by value size: files of a few GB (full runs) and ~100 MB (--quick).
DEFAULT_RECORDS = {64: 10_000_000, 2 << 10: 1_000_000, 100 << 10: 40_000}
QUICK_RECORDS = {64: 1_000_000, 2 << 10: 50_000, 100 << 10: 1_000}


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
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
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
        kill_children()
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
    sys.exit(main(sys.argv[1:]))
