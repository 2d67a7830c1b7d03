"""What the kernel counts for a process tree: RSS, PSS, USS, shared.

RSS counts every resident page a process maps, shared file pages included, so
the sum of RSS over DataLoader workers (what SLURM's jobacct_gather/linux adds
up) counts one page-cache page once per worker. PSS splits each shared page
among the processes that map it and sums to the real total. USS is what only
this process holds.

    python -m lmdbloader.memory [--interval 0.2] [--out PREFIX] [--match data.mdb] -- CMD ARGS...

runs CMD, samples its process tree, and writes PREFIX.csv and PREFIX.png
(RSS against PSS per process).
"""

import argparse
import csv
import errno
import os
import subprocess
import sys
import threading
import time

from . import _core


def process_memory(pid=None, match=None):
    """dict(pid, name, rss, pss, uss, shared, file_rss, shmem_rss[, match_rss])
    of one process, as the core reads them (/proc/<pid>/smaps_rollup and
    status; shmem_rss is resident shared memory: batch rings, /dev/shm);
    ``match_rss`` sums the RSS of mappings whose path contains ``match`` (for
    example "data.mdb")."""
    pid = pid or os.getpid()
    try:
        counts = _core.process_memory(pid)
    except OSError as e:  # the process is gone (or not ours): as reading /proc would say
        if e.errno == errno.EACCES:
            raise PermissionError(e.errno, e.strerror) from None
        raise ProcessLookupError(e.errno, e.strerror) from None
    with open(f"/proc/{pid}/comm") as c:
        name = c.read().strip()
    out = {"pid": pid, "name": name, **counts}
    if match:
        out["match_rss"] = _match_rss(pid, match)
    return out


def _match_rss(pid, match):
    total, inside = 0, False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split(None, 6)
            if head and "-" in head[0] and not head[0].endswith(":"):
                inside = len(head) >= 6 and match in line
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1]) * 1024
    return total


def children(pid):
    """Pids of all descendants of ``pid`` (from /proc/<pid>/task/*/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    kids = [int(k) for k in f.read().split()]
                out.extend(kids)
                todo.extend(kids)
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            pass
    return out


def snapshot(pid=None, match=None):
    """process_memory() of ``pid`` and each of its descendants (gone ones skipped)."""
    pid = pid or os.getpid()
    out = []
    for p in [pid] + children(pid):
        try:
            out.append(process_memory(p, match))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            pass
    return out


class Sampler:
    """Samples snapshot() of a process tree every ``interval`` seconds in a thread.

    ``samples`` is a list of dicts (time, pid, name, rss, pss, uss, shared).
    """

    def __init__(self, pid=None, interval=0.2, match=None):
        self.pid = pid or os.getpid()
        self.interval = interval
        self.match = match
        self.samples = []
        self._stop = threading.Event()
        self._thread = None
        self._t0 = None

    def sample(self):
        now = time.monotonic() - self._t0
        for row in snapshot(self.pid, self.match):
            row["time"] = now
            self.samples.append(row)

    def start(self):
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join()
        return self.samples

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def write_csv(self, path):
        keys = ["time", "pid", "name", "rss", "pss", "uss", "shared", "shmem_rss"]
        keys += ["match_rss"] if self.match else []
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
            w.writeheader()
            w.writerows(self.samples)


def plot(samples, path, title="memory per process"):
    """PNG of RSS (solid) and PSS (dashed) per process over time."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5))
    for pid in sorted({s["pid"] for s in samples}):
        rows = [s for s in samples if s["pid"] == pid]
        t = [r["time"] for r in rows]
        line, = ax.plot(t, [r["rss"] / 2**20 for r in rows], label=f"{rows[0]['name']} {pid} RSS")
        ax.plot(t, [r["pss"] / 2**20 for r in rows], "--", color=line.get_color(), label=f"{pid} PSS")
    ax.set_xlabel("seconds")
    ax.set_ylabel("MiB")
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        print("usage: python -m lmdbloader.memory [--interval S] [--out PREFIX] [--match TEXT] -- CMD ...",
              file=sys.stderr)
        return 2
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="python -m lmdbloader.memory")
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument("--out", default="memory")
    parser.add_argument("--match", default=None, help="also sum RSS of mappings whose path contains this")
    args = parser.parse_args(argv[:split])
    cmd = argv[split + 1:]
    if not cmd:
        parser.error("no command after --")
    if not args.interval > 0:
        parser.error(f"--interval must be more than 0 seconds, got {args.interval}")
    out_dir = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(out_dir):
        # Found out before the command runs, not after it has run for hours.
        parser.error(f"--out {args.out}: folder {out_dir} does not exist")
    try:
        proc = subprocess.Popen(cmd)
    except OSError as e:
        print(f"python -m lmdbloader.memory: cannot run {cmd[0]}: {e.strerror}", file=sys.stderr)
        return 127
    sampler = Sampler(proc.pid, args.interval, args.match).start()
    rc = proc.wait()
    samples = sampler.stop()
    sampler.write_csv(args.out + ".csv")
    if samples:
        plot(samples, args.out + ".png", title=" ".join(cmd)[:80])
    peak = {}
    for s in samples:
        peak[s["pid"]] = max(peak.get(s["pid"], 0), s["rss"])
    print(f"{len(samples)} samples; peak RSS sum {sum(peak.values()) / 2**20:.1f} MiB; "
          f"wrote {args.out}.csv and {args.out}.png", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
