"""lock=True readers opening again and again beside a py-lmdb writer that keeps
committing: every open reads one consistent snapshot, none reports the sound
file as damaged, and every record read is the bytes that snapshot holds.

The writer rewrites keys in small transactions (every fourth value on
overflow pages of varying length), so it reuses freed pages within a few
commits of freeing them, and appends keys for a while, so the file grows
under the readers. The readers are two threads of this process (one
mmap, one pread), each opening, checking records and closing in a loop:
two Readers of one database in one process is the case where a second
liblmdb environment's close once freed the other's reader slot."""

import inspect
import random
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import lmdbloader

lmdb = pytest.importorskip("lmdb")

KEYS = 600
SECONDS = 16

# Run as `python -c WRITER PATH SECONDS` with value() below prepended.
WRITER = textwrap.dedent("""
    import random, sys, time
    import lmdb
    path, seconds = sys.argv[1], float(sys.argv[2])
    env = lmdb.open(path, map_size=256 << 20, sync=False, metasync=False)
    rnd = random.Random(7)
    gen = 1
    print("ready", flush=True)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with env.begin(write=True) as txn:
            for i in rnd.sample(range(KEYS), 40):
                txn.put(b"k%06d" % i, value(i, gen))
            if gen <= 3000:  # the file grows under the readers for a while
                txn.put(b"k%06d" % (KEYS + gen - 1), value(KEYS + gen - 1, gen))
        gen += 1
    env.close()
    print(gen - 1, flush=True)
""")


def value(i, gen):
    """Record i as written by commit `gen`: its number and commit, then filler
    whose length depends on both (every fourth on 1-4 overflow pages)."""
    head = b"%06d:%08d:" % (i, gen)
    size = 2100 + (gen * 131 + i * 17) % 14000 if i % 4 == 0 else 40 + (gen * 7 + i) % 400
    return head + bytes([i % 251]) * (size - len(head))


def expected(i, record):
    """Whether `record` is record i as some commit wrote it."""
    head = record[:16]
    if len(head) < 16 or head[6:7] + head[15:16] != b"::" or not (head[:6] + head[7:15]).isdigit():
        return False
    return int(record[:6]) == i and record == value(i, int(record[7:15]))


def test_lock_readers_reopening_beside_a_committing_writer(tmp_path):
    path = str(tmp_path / "db")
    env = lmdb.open(path, map_size=256 << 20)
    with env.begin(write=True) as txn:
        for i in range(KEYS):
            txn.put(b"k%06d" % i, value(i, 0))
    env.close()

    code = f"KEYS = {KEYS}\n" + inspect.getsource(value) + WRITER
    writer = subprocess.Popen([sys.executable, "-c", code, path, str(SECONDS)],
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "ready"
    results = {}
    deadline = time.monotonic() + SECONDS - 1

    def read_loop(mode):
        rnd = random.Random(mode)
        opens, damaged, wrong = 0, [], []
        while time.monotonic() < deadline:
            opens += 1
            try:
                r = lmdbloader.Reader(path, lock=True, mode=mode, index_dir="none")
            except lmdbloader.CorruptedError as e:
                damaged.append(str(e))
                continue
            except Exception as e:  # noqa: BLE001 - any other error is a wrong answer too
                wrong.append(repr(e))
                continue
            n = len(r)
            if n < KEYS:
                wrong.append(f"{n} records")
            for i in [0, 1, n - 1] + rnd.sample(range(n), 8):
                record = bytes(r[i])
                if not expected(i, record):
                    wrong.append(f"record {i} of {n}: {record[:24]!r} ({len(record)} bytes)")
            r.close()
        results[mode] = (opens, damaged, wrong)

    threads = [threading.Thread(target=read_loop, args=(mode,)) for mode in ("mmap", "pread")]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out, _ = writer.communicate(timeout=60)
    finally:
        writer.kill()
        writer.wait()
    assert writer.returncode == 0
    commits = int(out.split()[-1])

    report = {mode: (opens, len(damaged), len(wrong), (damaged + wrong)[:3])
              for mode, (opens, damaged, wrong) in results.items()}
    print(f"{commits} commits; per mode: opens, false damage reports, wrong records, "
          f"first messages: {report}")
    assert commits >= 200, report
    assert set(results) == {"mmap", "pread"}, report
    for mode, (opens, damaged, wrong) in results.items():
        assert opens >= 200, report  # each reader opened often while the writer committed
        assert damaged == [], report
        assert wrong == [], report
