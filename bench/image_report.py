"""The image bench's report: medians over rounds, the markdown tables, the
plot and the demo's few lines."""

import statistics

from image_recipes import VARIANTS


def summarize(runs, baseline):
    """Medians over rounds; the ratio to the baseline taken within each round."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return {"error": runs[-1]["error"] if runs else "no run"}

    def med(key):
        values = [r[key] for r in ok if r.get(key) is not None]
        return statistics.median(values) if values else None

    pairs = [(r, b) for r, b in zip(runs, baseline) if "error" not in r and "error" not in b]
    return {
        "items_per_s": med("items_per_s"),
        "ratio": statistics.median(r["items_per_s"] / b["items_per_s"] for r, b in pairs) if pairs else None,
        "worker_peak_rss_mib": med("worker_peak_rss_mib"),
        "worker_peak_pss_mib": med("worker_peak_pss_mib"),
        "main_peak_rss_mib": statistics.median(r["main_peak"]["rss_mib"] for r in ok),
        "main_peak_pss_mib": statistics.median(r["main_peak"]["pss_mib"] for r in ok),
        "job_peak_rss_mib": med("job_peak_rss_mib"),
        "job_peak_pss_mib": med("job_peak_pss_mib"),
        "dev_shm_peak_mib": med("dev_shm_peak_mib"),
        "dev_shm_fs_peak_mib": med("dev_shm_fs_peak_mib"),
        "ring_mib": med("ring_mib"),
        "worker_peak_file_rss_mib": med("worker_peak_file_rss_mib"),
        "worker_growth_mib": med("worker_growth_mib"),
        "rss_budget_mib": med("rss_budget_mib"),
        "rounds": len(ok), "runs": runs}


def _mib(v):
    return "-" if v is None else f"{v:.0f}"


def print_table(recipe, table, notes, unit, rounds, epochs):
    print(f"\n{recipe}: {unit}/s, medians of epochs 2-{epochs} and of {rounds} round(s)")
    print(f"| variant | {unit}/s | x py-lmdb | worker peak RSS / PSS MiB | main peak RSS / PSS MiB "
          f"| job peak RSS / PSS MiB (its processes summed) | /dev/shm held, peak MiB | batch rings MiB (memfd) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, row in table.items():
        label = VARIANTS[name]
        if "error" in row:
            print(f"| {label} | failed: {row['error']} | | | | | | |")
            continue
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
        print(f"| {label} | {row['items_per_s']:.0f} | {ratio} | {_mib(row['worker_peak_rss_mib'])} / "
              f"{_mib(row['worker_peak_pss_mib'])} | {row['main_peak_rss_mib']:.0f} / "
              f"{row['main_peak_pss_mib']:.0f} | {_mib(row['job_peak_rss_mib'])} / {_mib(row['job_peak_pss_mib'])} | "
              f"{row['dev_shm_peak_mib']:.1f} | {_mib(row['ring_mib'])} |")
    for name, row in table.items():
        if "error" in row or row.get("worker_peak_file_rss_mib") is None:
            continue
        # Each worker's peaks over the run, and what it grew after epoch 1 (persistent workers).
        shown = []
        for run in row["runs"]:
            for w in run.get("worker_peaks", []):
                shown.append(f"{w['rss_mib']:.0f}/{w['pss_mib']:.0f}/{w.get('file_rss_mib', 0):.1f}/"
                             f"{w.get('shmem_mib', 0):.0f}/{w.get('later_rss_mib', 0) - w.get('epoch1_rss_mib', 0):+.1f}")
        budget = "none" if row["rss_budget_mib"] is None else f"{row['rss_budget_mib']:.0f} MiB"
        print(f"- {VARIANTS[name]}: rss_budget {budget}; each worker's peak RSS / PSS / data file's RSS / "
              f"shared memory (rings) MiB / RSS growth after epoch 1: {', '.join(shown)}")
    for name, why in notes.items():
        print(f"- {VARIANTS[name]}: {why}")
    print(flush=True)


def plot(report, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    recipes = list(report["recipes"])
    fig, axes = plt.subplots(2, len(recipes), figsize=(max(7.0, 5.5 * len(recipes)), 8.5), squeeze=False)
    for col, recipe in enumerate(recipes):
        entry = report["recipes"][recipe]
        rows = {k: v for k, v in entry["table"].items() if "error" not in v}
        names = list(rows)
        labels = [VARIANTS[k].replace(" + ", "\n+ ") for k in names]
        x = range(len(names))
        ax = axes[0][col]
        bars = ax.bar(x, [rows[k]["items_per_s"] for k in names], color="tab:blue")
        for bar, k in zip(bars, names):
            r = rows[k]["ratio"]
            ax.annotate("" if r is None else f"{r:.2f}x", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize=8)
        ax.set_title(f"{recipe}: {entry['unit']}/s (x py-lmdb)")
        ax.set_xticks(list(x), labels, fontsize=6)
        ax = axes[1][col]
        series = [("worker peak RSS", "worker_peak_rss_mib"), ("worker peak PSS", "worker_peak_pss_mib"),
                  ("main peak RSS", "main_peak_rss_mib"), ("main peak PSS", "main_peak_pss_mib"),
                  ("job peak RSS (summed)", "job_peak_rss_mib"),
                  ("/dev/shm peak", "dev_shm_peak_mib")]
        w = 0.8 / len(series)
        for j, (label, key) in enumerate(series):
            ax.bar([i + (j - (len(series) - 1) / 2) * w for i in x], [rows[k][key] or 0 for k in names], w,
                   label=label)
        ax.set_title(f"{recipe}: peak memory per process (MiB)")
        ax.set_xticks(list(x), labels, fontsize=6)
        ax.legend(fontsize=7)
    with_dali = any("dali" in e["table"] for e in report["recipes"].values())
    dali = f" (DALI: {report['workers']} threads)" if with_dali else ""
    fig.suptitle(f"{report['workers']} persistent workers{dali}, batch "
                 f"{report['batch']},\nmedians of epochs 2-{report['epochs']} and of {report['repeats']} round(s)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def print_demo(report, args):
    """The demo's few lines: each variant's images/s, its workers' RSS, /dev/shm."""
    table = report["recipes"]["train"]["table"]
    print(f"image job: train recipe (RandomResizedCrop 224, flip, normalize) over {args.images} JPEG photographs, "
          f"{args.workers} persistent workers, batch {args.batch}")
    for name, row in table.items():
        if "error" in row:
            print(f"  {VARIANTS[name]}: failed: {row['error']}")
            continue
        run = row["runs"][-1]
        workers = ", ".join(f"{w['rss_mib']:.0f}" for w in run["worker_peaks"])
        workers = f"worker peak RSS {workers} MiB" if workers else "no worker process (threads)"
        ring = f", batch rings {row['ring_mib']:.0f} MiB (memfd)" if row["ring_mib"] else ""
        print(f"  {VARIANTS[name]}: {row['items_per_s']:.0f} images/s ({row['ratio']:.2f}x), job peak RSS / PSS "
              f"{_mib(row['job_peak_rss_mib'])} / {_mib(row['job_peak_pss_mib'])} MiB (all its processes), "
              f"{workers}, /dev/shm peak {row['dev_shm_peak_mib']:.1f} MiB{ring}")
    if report.get("note"):
        print(f"  note: {report['note']}: variant 2 stands in for it")
