"""A network file system on this machine: bench/netfs.c (a FUSE passthrough
adding a round trip to every read request, a cap on requests in flight and an
optional link bandwidth), built and mounted from Python.

    with netfs.Mount(backing_dir, latency_ms=1, in_flight=32, bandwidth=117e6) as m:
        m.path("train.lmdb")            # the same file, read through the mount
        before = m.stats()              # the FS's counters (reads, read_bytes, ...)
        ...
        m.delta(before)                 # what was read since

- ``unavailable()``: why the emulation cannot run here (no /dev/fuse, no
  fusermount3, no gcc or libfuse3 headers), or None.
- ``build(out_dir=bench/out)``: compiles netfs.c there (gcc -O2 -Wall -Wextra) when the
  source is newer than the binary; returns the binary's path.
- ``Mount``: mounts on a fresh temporary directory (the daemon in its own
  session, so that Ctrl-C reaches Python first); ``close()`` (also on exit,
  on an exception, at interpreter exit, and from SIGTERM once
  ``install_signal_cleanup()`` was called) stops the daemon, unmounts with
  fusermount3 -u (-uz if busy) and removes the directory.
- ``evict(paths)``: drops files from the page cache with
  posix_fadvise(DONTNEED) and returns the bytes still cached, counted with
  mincore (0 when the eviction took). Call it on the files through the mount
  (the FUSE inode's cache, what readers hit) and on the backing files (what
  the daemon's reads hit, the "server's" cache).
"""

import atexit
import ctypes
import json
import mmap
import os
import shutil
import signal
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "netfs.c")
STATS_FILE = ".netfs-stats"
PAGE = os.sysconf("SC_PAGE_SIZE")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_live = set()


def unavailable():
    """None when FUSE mounts can be made and netfs.c compiled here, else why not."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse (FUSE is not available in this kernel or container)"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable by this user"
    for tool in ("fusermount3", "gcc", "pkg-config"):
        if not shutil.which(tool):
            return f"{tool} not found (apt-get install -y fuse3 libfuse3-dev gcc pkg-config)"
    if subprocess.run(["pkg-config", "--exists", "fuse3"], check=False).returncode != 0:
        return "libfuse3 headers not found (apt-get install -y libfuse3-dev)"
    return None


def build(out_dir=None):
    """Compiles netfs.c into out_dir (when missing or older than the source);
    returns the binary's path. Raises RuntimeError with the compiler's
    message, and on any warning (-Wall -Wextra)."""
    out_dir = out_dir or os.path.join(HERE, "out")
    os.makedirs(out_dir, exist_ok=True)
    binary = os.path.join(out_dir, "netfs")
    if os.path.exists(binary) and os.path.getmtime(binary) >= os.path.getmtime(SOURCE):
        return binary
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "fuse3"], capture_output=True, text=True,
                           check=True).stdout.split()
    tmp = binary + ".tmp"
    out = subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-o", tmp, SOURCE, *flags],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0 or out.stderr.strip():
        raise RuntimeError(f"gcc netfs.c: exit {out.returncode}\n{out.stderr}")
    os.replace(tmp, binary)
    return binary


def _mounted(path):
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f)


class Mount:
    """The backing directory mounted through netfs; see the module docstring."""

    def __init__(self, backing, latency_ms=1.0, in_flight=32, bandwidth=None, open_latency_ms=0.0,
                 binary=None, timeout=10.0, extra_args=(), inject_errors=False):
        """extra_args: more of netfs.c's options (--max-background=12,
        --threads=10: libfuse's and the kernel's defaults) or -o options.
        inject_errors: reads can be made to fail (fail_next_reads)."""
        self.backing = os.path.realpath(backing)
        self.options = {"latency_ms": latency_ms, "in_flight": in_flight, "bandwidth": bandwidth or 0,
                        "open_latency_ms": open_latency_ms}
        self.binary = binary or build()
        self.root = tempfile.mkdtemp(prefix="netfs-mnt-")
        self.log = os.path.join(tempfile.gettempdir(), os.path.basename(self.root) + ".log")
        self.final_stats = None
        self._owner = os.getpid()
        self._proc = None
        self._fail_control = self.root + ".fail" if inject_errors else None
        injecting = [f"--fail-control={self._fail_control}"] if inject_errors else []
        cmd = [self.binary, self.backing, self.root, f"--latency-ms={latency_ms}", f"--in-flight={in_flight}",
               f"--bandwidth={bandwidth or 0}", f"--open-latency-ms={open_latency_ms}", *injecting, *extra_args]
        _live.add(self)
        try:
            with open(self.log, "wb") as log:
                self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            deadline = time.monotonic() + timeout
            while not _mounted(self.root):
                if self._proc.poll() is not None:
                    raise RuntimeError(f"netfs exited {self._proc.returncode} before mounting: {self._log_text()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"netfs did not mount within {timeout} s: {self._log_text()}")
                time.sleep(0.01)
        except BaseException:
            self.close()
            raise

    def fail_next_reads(self, count, offset=0, length=1 << 62):
        """The next `count` read requests that overlap [offset, offset +
        length) of any file fail with EIO, then reads pass again (a mount
        made with inject_errors=True)."""
        if self._fail_control is None:
            raise RuntimeError("this mount was made without inject_errors=True")
        tmp = self._fail_control + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{offset} {length} {count}\n")
        os.replace(tmp, self._fail_control)  # the daemon never reads half of it

    def _log_text(self):
        try:
            with open(self.log) as f:
                return f.read().strip()
        except OSError:
            return ""

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def stats(self):
        """The FS's counters now (netfs.c's /.netfs-stats)."""
        with open(os.path.join(self.root, STATS_FILE)) as f:
            return json.load(f)

    @staticmethod
    def delta(before, after):
        """Counters that grew between two stats(); peak_in_flight: the most
        requests served at once in between (when no other stats() came
        between them), max_in_flight: since the mount."""
        keys = ("reads", "read_bytes", "asked_bytes", "read_errors", "opens", "getattrs", "readdirs",
                "slot_wait_s", "link_wait_s", "busy_s")
        out = {k: after[k] - before[k] for k in keys}
        out["read_sizes_kib"] = {k: after["read_sizes_kib"][k] - before["read_sizes_kib"][k]
                                 for k in after["read_sizes_kib"]}
        out["max_in_flight"] = after["max_in_flight"]
        out["peak_in_flight"] = after["peak_in_flight"]
        return out

    def close(self):
        """Stops the daemon and unmounts; safe to call twice and from any
        path out (only the process that mounted acts)."""
        if os.getpid() != self._owner or self not in _live:
            return
        _live.discard(self)
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # libfuse's handler exits the loop and unmounts
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for args in (["-u"], ["-uz"]):
            if not _mounted(self.root):
                break
            subprocess.run(["fusermount3", *args, self.root], capture_output=True, check=False)
            time.sleep(0.05)
        if self._fail_control:
            for leftover in (self._fail_control, self._fail_control + ".tmp"):
                if os.path.exists(leftover):
                    os.unlink(leftover)
        text = self._log_text()
        if "netfs stats: " in text:
            self.final_stats = json.loads(text.rsplit("netfs stats: ", 1)[1].splitlines()[0])
        if not _mounted(self.root):
            try:
                os.rmdir(self.root)
                os.unlink(self.log)
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def close_all():
    for m in list(_live):
        m.close()


atexit.register(close_all)


def install_signal_cleanup():
    """SIGTERM and SIGHUP raise SystemExit, so that finally blocks and atexit
    unmount; SIGINT raises KeyboardInterrupt even where the shell that
    started us ignored it (a background job)."""
    def handler(signum, frame):
        raise SystemExit(128 + signum)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def files_under(path):
    """path itself, or every file under it, sorted."""
    if not os.path.isdir(path):
        return [path]
    out = []
    for root, dirs, names in os.walk(path):
        dirs.sort()
        out.extend(os.path.join(root, n) for n in sorted(names))
    return out


def evict(paths, stubborn=None):
    """posix_fadvise(DONTNEED) on every file in paths, then counts with
    mincore what each still has in the page cache; a file with pages left is
    tried twice more, 50 ms apart (and appended to `stubborn`, a list, when
    given). Returns the bytes still cached after that (0: all evicted)."""
    left = 0
    for f in paths:
        for attempt in range(3):
            fd = os.open(f, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                size = os.fstat(fd).st_size
                cached = _cached(fd, size) if size else 0
            finally:
                os.close(fd)
            if not cached:
                break
            if stubborn is not None and attempt == 0:
                stubborn.append(f)
            time.sleep(0.05)
        left += cached
    return left


def _cached(fd, size):
    """Bytes of the open file in the page cache: mapped (no page is read by
    mapping it), counted with mincore, unmapped."""
    addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    if addr == ctypes.c_void_p(-1).value:
        raise OSError(ctypes.get_errno(), "mmap")
    try:
        vec = (ctypes.c_ubyte * ((size + PAGE - 1) // PAGE))()
        if _libc.mincore(addr, size, vec) != 0:
            raise OSError(ctypes.get_errno(), "mincore")
        return (len(vec) - bytes(vec).count(0)) * PAGE  # Linux sets only bit 0
    finally:
        _libc.munmap(addr, size)
