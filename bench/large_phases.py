"""The large-corpus bench's phases (bench/large_corpus.py): the index kinds
this build has, the opens, the random reads and the DataLoader, each a
round of child measurements, and their medians over rounds."""

import os
import shutil
import statistics
import sys

from large_child import KINDS
from large_db import MiB, sequential_read


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


def _budget_note(row, args):
    if row.get("budget_refused"):
        return f"none ({args.budget} refused)"
    return args.budget if row.get("budget", args.budget_bytes) else "none"


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
