"""The large-corpus bench's markdown tables."""

import statistics

from large_db import MiB


def _f(x, fmt="{:,.0f}"):
    return "-" if x is None else fmt.format(x)


def _mib(x):
    return "-" if x is None else f"{x / MiB:,.0f}"


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
