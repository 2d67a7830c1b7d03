"""get_batch releases the GIL: another Python thread makes progress meanwhile; closing a
reader under other threads' reads is safe."""

import pytest

import lmdbloader

from conftest import MiB
from gil_probe import spinner_during


@pytest.mark.serial
def test_other_thread_progresses_during_get_batch(tmp_path):
    path = str(tmp_path / "c")
    with lmdbloader.CorpusWriter(path) as w:
        for i in range(64):
            w.add(f"r{i}", bytes([i % 256]) * MiB)
    r = lmdbloader.Reader(path)
    indices = list(range(64)) * 24
    out, elapsed, during, rate = spinner_during(lambda: r.get_batch(indices))
    assert out[65] == bytes([1]) * MiB
    assert elapsed > 0.05, "the batch was too quick to tell"
    assert during > 0.3 * rate * elapsed, \
        f"the other thread ran {during} times in {elapsed:.3f} s (free rate {rate:.0f}/s)"


@pytest.mark.parametrize("mode", ["pread", "mmap"])
def test_closing_a_reader_while_other_threads_read_never_crashes(tmp_path, mode):
    """close() from one thread while others are inside reads: the reads in
    flight finish (they hold the core), later ones raise ValueError, and the
    process lives. Run in a child, so a crash fails the test instead of
    killing the suite."""
    import subprocess
    import sys

    path = str(tmp_path / "c")
    with lmdbloader.CorpusWriter(path) as w:
        for i in range(400):
            w.add(str(i), bytes([i % 251]) * (100 + (i * 7919) % 70_000))
    script = f"""
import random, threading, time, lmdbloader
errors = set()
for trial in range(20):
    r = lmdbloader.Reader({path!r}, mode={mode!r}, rss_budget="2MiB")
    def work(seed):
        rnd = random.Random(seed)
        try:
            while True:
                if rnd.random() < 0.5:
                    r[rnd.randrange(400)]
                else:
                    r.get_batch([rnd.randrange(400) for _ in range(30)])
        except Exception as e:
            errors.add(type(e).__name__ + ": " + str(e))
    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads: t.start()
    time.sleep(random.random() * 0.03)
    r.close()
    for t in threads: t.join()
print(sorted(errors))
"""
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "['ValueError: I/O operation on a closed lmdbloader.Reader']", res.stdout
