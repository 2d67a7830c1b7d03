"""Whether a call releases the GIL, told by another Python thread's progress
while it runs: a spinner counts as fast as it can, first while the main
thread sleeps (its free rate), then during the call. Had the call held the
GIL, the spinner would have run for at most one switch interval (5 ms) of
the call's whole time."""

import threading
import time


def spinner_during(call):
    """Runs `call()`; returns (its result, seconds it took, the spinner's
    counts during it, the spinner's free rate in counts a second)."""
    stop = threading.Event()
    ticks = [0]

    def spin():
        while not stop.is_set():
            ticks[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        t0, k0 = time.monotonic(), ticks[0]
        time.sleep(0.2)
        rate = (ticks[0] - k0) / (time.monotonic() - t0)
        t0, k0 = time.monotonic(), ticks[0]
        result = call()
        elapsed, during = time.monotonic() - t0, ticks[0] - k0
    finally:
        stop.set()
        t.join()
    return result, elapsed, during, rate
