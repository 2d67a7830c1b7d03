"""The large-corpus bench's parent side of a measurement: each runs as
bench/large_child.py in a fresh process group, killed with its workers when
it times out or the bench is stopped, its failure named and kept."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "large_child.py")


_LIVE = set()


def kill_children(*_):
    for p in list(_LIVE):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _LIVE.clear()


def on_signal(signum, _frame):
    kill_children()
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
        cmd = [sys.executable, CHILD, json.dumps(spec)]
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
