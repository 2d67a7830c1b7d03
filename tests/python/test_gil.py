"""get_batch releases the GIL: another Python thread makes progress meanwhile."""

import threading
import time

import lmdbloader

from conftest import MiB


def test_other_thread_progresses_during_get_batch(tmp_path):
    path = str(tmp_path / "c")
    with lmdbloader.CorpusWriter(path) as w:
        for i in range(64):
            w.add(f"r{i}", bytes([i % 256]) * MiB)
    r = lmdbloader.Reader(path)
    indices = list(range(64)) * 24
    stop = threading.Event()
    ticks = [0]

    def spin():
        while not stop.is_set():
            ticks[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        # The spinner's own rate while the main thread sleeps.
        t0, k0 = time.monotonic(), ticks[0]
        time.sleep(0.2)
        rate = (ticks[0] - k0) / (time.monotonic() - t0)
        t0, k0 = time.monotonic(), ticks[0]
        out = r.get_batch(indices)
        elapsed, during = time.monotonic() - t0, ticks[0] - k0
    finally:
        stop.set()
        t.join()
    assert out[65] == bytes([1]) * MiB
    # Had the call held the GIL, the spinner would have run for at most one
    # switch interval (5 ms) of a call that takes far longer.
    assert elapsed > 0.05, "the batch was too quick to tell"
    assert during > 0.3 * rate * elapsed, \
        f"the other thread ran {during} times in {elapsed:.3f} s (free rate {rate:.0f}/s)"
