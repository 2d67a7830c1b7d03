"""The page cache as the kernel sees it, for the cold-read benchmarks.

- ``evict(path)``: drop a file (or every file under a directory) from the
  page cache with posix_fadvise(DONTNEED), after writing back dirty pages.
- ``cached_bytes(path)``: bytes of the file in the page cache (mincore).
- ``folio_sizes(path)``: how many folios of each size hold the file's cached
  pages, read from /proc/self/pagemap and /proc/kpageflags (root only;
  None otherwise). A folio is a head page (no KPF_COMPOUND_TAIL) followed by
  its tail pages.
"""

import ctypes
import mmap
import os
import struct

PAGE = os.sysconf("SC_PAGE_SIZE")
KPF_COMPOUND_TAIL = 1 << 16
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


def _files(path):
    if os.path.isdir(path):
        for root, _, names in os.walk(path):
            for name in names:
                yield os.path.join(root, name)
    else:
        yield path


def evict(path):
    for f in _files(path):
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def read_sequentially(path):
    """Evict, then read the file front to back: the cache a `cat` leaves."""
    evict(path)
    for f in _files(path):
        fd = os.open(f, os.O_RDONLY)
        try:
            while os.read(fd, 8 << 20):
                pass
        finally:
            os.close(fd)


def _mapped(path):
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    m = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    os.close(fd)
    return m, size


def _resident(m, size):
    vec = (ctypes.c_ubyte * ((size + PAGE - 1) // PAGE))()
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    if _libc.mincore(ctypes.c_void_p(addr), size, vec) != 0:
        raise OSError(ctypes.get_errno(), "mincore")
    return addr, [i for i, v in enumerate(vec) if v & 1]


def cached_bytes(path):
    m, size = _mapped(path)
    try:
        _, pages = _resident(m, size)
        return len(pages) * PAGE
    finally:
        m.close()


def folio_sizes(path):
    """{folio size in KiB: count} over the file's cached pages, or None
    without access to /proc/kpageflags."""
    if not os.access("/proc/kpageflags", os.R_OK):
        return None
    m, size = _mapped(path)
    try:
        addr, pages = _resident(m, size)
        hist, run = {}, 0
        with open("/proc/self/pagemap", "rb", buffering=0) as pagemap, \
                open("/proc/kpageflags", "rb", buffering=0) as kpageflags:
            previous = None
            for i in pages:
                m[i * PAGE]  # map the cached page (a read fault on a private mapping maps the cache's page)
                entry = struct.unpack("<Q", os.pread(pagemap.fileno(), 8, (addr // PAGE + i) * 8))[0]
                pfn = entry & ((1 << 55) - 1)
                flags = struct.unpack("<Q", os.pread(kpageflags.fileno(), 8, pfn * 8))[0]
                tail = bool(flags & KPF_COMPOUND_TAIL) and previous == i - 1
                if not tail and run:
                    hist[run * PAGE // 1024] = hist.get(run * PAGE // 1024, 0) + 1
                    run = 0
                run += 1
                previous = i
            if run:
                hist[run * PAGE // 1024] = hist.get(run * PAGE // 1024, 0) + 1
        return dict(sorted(hist.items()))
    finally:
        m.close()


def summarize_folios(hist):
    """'72% of cached bytes in folios of >= 1 MiB; 4 KiB: 1200, 2048 KiB: 300'."""
    if not hist:
        return "n/a"
    total = sum(k * v for k, v in hist.items())
    large = sum(k * v for k, v in hist.items() if k >= 1024)
    return f"{100 * large / total:.0f}% of cached bytes in folios >= 1 MiB"
