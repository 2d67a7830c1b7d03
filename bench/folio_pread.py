"""Does the page cache a cold random epoch leaves serve later epochs slower?

A bare experiment without lmdbloader: a 1 GiB file read in 256 KiB pieces.
The cache is filled three ways (a sequential read; random 256 KiB preads; the
2 MiB chunk fill lmdbloader's cache="fill" does: MADV_POPULATE_READ through a
MADV_HUGEPAGE mapping), then read twice more with random 256 KiB preads.
Prints the folio sizes (bench/page_cache.py, root) and GB/s of each later pass.

    python bench/folio_pread.py [--path /var/tmp/folio-test] [--rounds 3]
"""

import argparse
import mmap
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import page_cache  # noqa: E402

SIZE = 1 << 30
PIECE = 256 << 10
CHUNK = 2 << 20
MADV_POPULATE_READ = 22  # Linux 5.14; Python's mmap module lacks the name


def random_pass(fd, offsets):
    start = time.perf_counter()
    for o in offsets:
        os.pread(fd, PIECE, o)
    return SIZE / (time.perf_counter() - start) / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--path", default="/var/tmp/folio-test")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not os.path.exists(args.path) or os.path.getsize(args.path) != SIZE:
        with open(args.path, "wb") as f:
            for _ in range(SIZE >> 20):
                f.write(os.urandom(1 << 20))
    fd = os.open(args.path, os.O_RDONLY)
    offsets = list(range(0, SIZE, PIECE))
    random.Random(1).shuffle(offsets)

    def fill_chunks():
        m = mmap.mmap(fd, SIZE, prot=mmap.PROT_READ)
        m.madvise(mmap.MADV_HUGEPAGE)
        for o in offsets:
            c = o // CHUNK * CHUNK
            m.madvise(MADV_POPULATE_READ, c, CHUNK)
            m.madvise(mmap.MADV_DONTNEED, c, CHUNK)
        m.close()

    fills = {"sequential read": lambda: page_cache.read_sequentially(args.path),
             "random 256 KiB preads": lambda: random_pass(fd, offsets),
             "2 MiB chunk fill": fill_chunks}
    speeds = {name: [] for name in fills}
    folios = {}
    for _ in range(args.rounds):
        for name, fill in fills.items():
            page_cache.evict(args.path)
            fill()
            folios[name] = page_cache.summarize_folios(page_cache.folio_sizes(args.path))
            speeds[name] += [random_pass(fd, offsets) for _ in range(2)]
    print("| cache filled by | folios left | later random 256 KiB preads, GB/s (median, range) |")
    print("|---|---|---|")
    for name, s in speeds.items():
        print(f"| {name} | {folios[name]} | {statistics.median(s):.2f} ({min(s):.2f}-{max(s):.2f}) |")


if __name__ == "__main__":
    main()
