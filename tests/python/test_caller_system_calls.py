"""lmdbloader's I/O never cuts the caller's own system calls short.

Found from outside: a process that read batches through io_uring, closed the
Reader and then wrote 136,000 bytes into a pipe that was drained a moment
later saw the blocking write return 65,536 (releasing an io_uring ring
notifies every thread that submitted to it, as a signal would). Each case here
runs in a fresh child, many times, for every io engine: reads, then the event
(close, garbage collection, fork, nothing), then one blocking write into a
pipe the parent drains only after a pause, so the write must block; the write
must return everything.
"""

import gc
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import lmdbloader

RUNS = int(os.environ.get("CALLER_SYSCALL_RUNS", "20"))
PAYLOAD = 136_000  # more than a pipe's 64 KiB: the write blocks until drained


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    lmdb = pytest.importorskip("lmdb")
    path = str(tmp_path_factory.mktemp("syscalls") / "db")
    with lmdb.open(path, map_size=1 << 28) as env, env.begin(write=True) as txn:
        for i in range(200):
            txn.put(b"%05d" % i, bytes([i % 256]) * 10_000)
    return path


def _skip_without(engine, database):
    """Skips where the kernel refuses io_uring (the other engines always work)."""
    if engine == "io_uring":
        try:
            lmdbloader.Reader(database, io_engine="io_uring", index_dir="none").close()
        except OSError as e:
            pytest.skip(f"io_uring not available here: {e}")


def _read_batches(path, engine):
    r = lmdbloader.Reader(path, io_engine=engine, index_dir="none")
    for start in range(0, len(r), 50):
        r.get_batch(list(range(start, min(len(r), start + 50))))
    return r


def _after_reads(path, engine, event):
    """Runs in the child: reads, then `event`; returns the reader if kept."""
    r = _read_batches(path, engine)
    if event == "close":
        r.close()
    elif event == "gc":
        del r
        gc.collect()
        return None
    elif event == "fork":
        pid = os.fork()
        if pid == 0:  # the grandchild reads and closes too, then leaves
            _read_batches(path, engine).close()
            os._exit(0)
        os.waitpid(pid, 0)
    elif event == "thread":  # another thread reads and closes while this one writes
        t = threading.Thread(target=lambda: _read_batches(path, engine).close())
        t.start()
        return t
    return r


def _one_run(path, engine, event, channel):
    if channel == "pipe":
        rd, wr = os.pipe()
    else:
        a, b = socket.socketpair()
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
        rd, wr = b.detach(), a.detach()
    pid = os.fork()
    if pid == 0:
        code = 2
        try:
            os.close(rd)
            if event == "exec":  # the write comes from the program this process becomes
                _read_batches(path, engine).close()
                os.set_inheritable(wr, True)
                os.execv(sys.executable, [sys.executable, "-c", EXEC_WRITER, str(wr)])
            kept = _after_reads(path, engine, event)
            written = os.write(wr, b"x" * PAYLOAD)
            if isinstance(kept, threading.Thread):
                kept.join()
            code = 0 if written == PAYLOAD else 1
        finally:
            os._exit(code)
    os.close(wr)
    time.sleep(0.5 if event == "exec" else 0.03)  # the child's write blocks meanwhile
    got = 0
    while True:
        chunk = os.read(rd, 1 << 20)
        if not chunk:
            break
        got += len(chunk)
    os.close(rd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), got


EXEC_WRITER = f"import os, sys; n = os.write(int(sys.argv[1]), b'x' * {PAYLOAD}); os._exit(0 if n == {PAYLOAD} else 1)"


@pytest.mark.parametrize("engine", ["io_uring", "threads", "sync"])
@pytest.mark.parametrize("event", ["close", "gc", "fork", "thread", "none"])
def test_blocking_write_after_reads_is_never_cut_short(database, engine, event):
    _skip_without(engine, database)
    runs = RUNS  # every event, every engine: at least 20 runs
    short = [r for r in (_one_run(database, engine, event, "pipe") for _ in range(runs)) if r != (0, PAYLOAD)]
    assert not short, f"{len(short)} of {runs} writes were cut short or failed (exit status, bytes): {short[:5]}"


def test_a_program_execd_after_reads_gets_its_blocking_write_whole(database):
    """exec drops the rings' last references (descriptors close-on-exec, the
    mappings with the old program): the new program's first blocking write
    must not be cut short by their release."""
    runs = max(5, RUNS // 2)
    short = [r for r in (_one_run(database, "auto", "exec", "pipe") for _ in range(runs)) if r != (0, PAYLOAD)]
    assert not short, f"{len(short)} of {runs} writes were cut short or failed (exit status, bytes): {short[:5]}"


def test_blocking_socket_write_after_close_is_never_cut_short(database):
    short = [r for r in (_one_run(database, "auto", "close", "socket") for _ in range(RUNS))
             if r != (0, PAYLOAD)]
    assert not short, f"socket writes cut short: {short[:5]}"


def test_many_readers_opened_and_closed_reuse_the_same_rings(database):
    # Rings live for the process: opening and closing readers must not pile up descriptors.
    def fds():
        return len(os.listdir("/proc/self/fd"))
    for _ in range(3):
        _read_batches(database, "auto").close()
    before = fds()
    for _ in range(50):
        _read_batches(database, "auto").close()
    assert fds() <= before, f"descriptors grew from {before} to {fds()} over 50 readers"


# The caller's SIGBUS handlers: lmdbloader's guard (which turns a fault in a
# mapping of its own truncated file into an error) sits in front of them and
# must hand them every other fault, once, and never hang. Each case touches a
# truncated mapping of a file that is not lmdbloader's, in a fresh process.
FOREIGN_SIGBUS = r'''
import faulthandler, mmap, os, signal, sys, tempfile
import lmdbloader
case, path = sys.argv[1], sys.argv[2]
signal.alarm(60)  # a hang ends by SIGALRM, not never
r = lmdbloader.Reader(path, mode="mmap", index_dir="none")
r[0]  # the guard is installed

def fault():
    fd, name = tempfile.mkstemp()
    os.write(fd, b"x" * 65536)
    m = mmap.mmap(fd, 65536)
    os.ftruncate(fd, 0)
    return m[40000]

if case == "faulthandler":
    faulthandler.enable()  # installed after the guard
    fault()
elif case == "faulthandler, forked child":
    faulthandler.enable()
    pid = os.fork()
    if pid == 0:
        signal.alarm(60)  # alarms are not inherited
        r[1]  # the first use in the child puts the guard back in front of faulthandler
        fault()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    os._exit(200 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else 1)
elif case == "dataloader worker":
    import torch.utils.data as tud
    class Faulting(tud.Dataset):
        def __len__(self):
            return 2
        def __getitem__(self, i):
            r[1]  # the first use in the worker puts the guard in front of torch's handler
            return fault()
    try:
        list(tud.DataLoader(Faulting(), batch_size=2, num_workers=1))
    except RuntimeError as e:
        print("DataLoader:", e)
        os._exit(100)
else:
    fault()
os._exit(0)  # the fault was swallowed
'''


@pytest.mark.parametrize("case", ["default action", "faulthandler", "faulthandler, forked child", "dataloader worker"])
def test_a_sigbus_that_is_not_lmdbloaders_reaches_the_callers_handlers_once(database, case):
    try:
        res = subprocess.run([sys.executable, "-c", FOREIGN_SIGBUS, case, database], capture_output=True,
                             text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case}: the process hung after a SIGBUS lmdbloader does not own")
    if case == "faulthandler, forked child":
        assert res.returncode == 200 + signal.SIGBUS, (res.returncode, res.stderr[-2000:])
    elif case == "dataloader worker":
        assert res.returncode == 100 and "DataLoader worker" in res.stdout, (res.returncode, res.stdout, res.stderr)
    else:
        assert res.returncode == -signal.SIGBUS, (res.returncode, res.stderr[-2000:])
    if case.startswith("faulthandler"):
        assert res.stderr.count("Fatal Python error: Bus error") == 1, res.stderr[-3000:]


def test_a_forked_child_never_closes_a_descriptor_the_caller_reused(database, tmp_path):
    """A forked child lets go of its copies of the parent's io_uring rings.
    A caller may have closed a ring's descriptor (a closerange before a
    daemon's work, say) and opened a file of its own under that number: the
    child must leave that file open, and the parent must neither use nor
    close it."""
    script = textwrap.dedent(r'''
        import os, sys
        import lmdbloader
        path, mine = sys.argv[1], sys.argv[2]
        r = lmdbloader.Reader(path, io_engine="io_uring", index_dir="none")
        r.get_batch(list(range(0, 100)))  # a ring is in the pool now
        def target(fd):
            try:
                return os.readlink(f"/proc/self/fd/{fd}")
            except FileNotFoundError:  # the listing's own descriptor, closed by now
                return None
        rings = [int(fd) for fd in os.listdir("/proc/self/fd") if target(fd) == "anon_inode:[io_uring]"]
        assert rings, "no io_uring descriptor"
        for fd in rings:  # the caller closes descriptors it does not own, and reuses the numbers
            os.close(fd)
            f = os.open(mine, os.O_RDONLY)
            if f != fd:
                os.dup2(f, fd)
                os.close(f)
        pid = os.fork()
        if pid == 0:
            lmdbloader.Reader(path, io_engine="io_uring", index_dir="none").get_batch(list(range(0, 100)))
            ok = all(os.path.samefile(f"/proc/self/fd/{fd}", mine) for fd in rings)
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        # The parent reads on, through a new ring, and the caller's files stay as they are.
        assert r.get_batch(list(range(0, 100))) == [r[i] for i in range(0, 100)]
        assert all(os.path.samefile(f"/proc/self/fd/{fd}", mine) for fd in rings)
        sys.exit(os.waitstatus_to_exitcode(status))
    ''')
    _skip_without("io_uring", database)
    mine = tmp_path / "callers-file"
    mine.write_bytes(b"the caller's")
    res = subprocess.run([sys.executable, "-c", script, database, str(mine)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, ("the child closed the caller's file", res.returncode, res.stderr[-2000:])


# A signal sent to the process goes to a thread that does not block it. A
# caller that blocks one to take it with sigwait (or a signalfd) must get it:
# lmdbloader's own threads (the threads engine's pool, chunk fills, a scan's
# prefetcher) block every signal a fault does not raise, so none lands there
# (SIGUSR1's default action would end the process).
BLOCKED_SIGNAL = r'''
import os, signal, sys
import lmdbloader
path, engine = sys.argv[1], sys.argv[2]
r = lmdbloader.Reader(path, io_engine=engine, cache=sys.argv[3], index_dir="none")
def evict():
    fd = os.open(os.path.join(path, "data.mdb"), os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
evict()
r.get_batch(list(range(len(r))))  # reads that wait on the device: the engine's threads start
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
for _ in range(20):
    evict()
    r.get_batch(list(range(len(r))))
    os.kill(os.getpid(), signal.SIGUSR1)
    got = signal.sigtimedwait({signal.SIGUSR1}, 10)
    if got is None or got.si_signo != signal.SIGUSR1:
        sys.exit(3)
print("ok")
'''


@pytest.mark.parametrize("engine,cache", [("threads", "exact"), ("threads", "fill"), ("io_uring", "fill")])
def test_a_signal_the_caller_blocks_to_wait_for_reaches_it(database, engine, cache):
    _skip_without(engine, database)
    # OpenBLAS's threads (numpy's) would take the signal too: none here, so only lmdbloader's could.
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    res = subprocess.run([sys.executable, "-c", BLOCKED_SIGNAL, database, engine, cache], capture_output=True,
                         text=True, timeout=120, env=env)
    assert res.returncode == 0 and "ok" in res.stdout, (
        f"exit status {res.returncode} (-{signal.SIGUSR1} is SIGUSR1 delivered to a thread of lmdbloader's)",
        res.stderr[-2000:])
