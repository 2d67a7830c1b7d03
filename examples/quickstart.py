"""The README's quick start: a corpus written by `lmdbloader convert` read in a
DataLoader (2 persistent workers, 2 epochs) under a 64 MiB budget per
process, each JPEG decoded, cropped, flipped and normalized as torchvision's
ImageNet recipe does, in C++, straight into the batch's shared memory.

    python3 examples/quickstart.py /tmp/photos.lmdb
"""

import sys
import time

import lmdbloader
from lmdbloader.memory import snapshot


def main(path):
    ds = lmdbloader.LmdbDataset(path, rss_budget="64MiB", decode=lmdbloader.ImageDecode(224))
    loader = lmdbloader.DataLoader(ds, batch_size=32, shuffle=True, num_workers=2, persistent_workers=True)
    for epoch in range(2):
        start, n = time.perf_counter(), 0
        for images, labels in loader:
            n += len(labels)
        print(f"epoch {epoch}: {n} images {tuple(images.shape[1:])}, "
              f"{n / (time.perf_counter() - start):.0f} images/s")
    for row in snapshot():  # what the kernel counts for this process and its workers
        print(f"pid {row['pid']:>7} {row['name']:<16} RSS {row['rss'] / 2**20:6.1f} MiB  "
              f"PSS {row['pss'] / 2**20:6.1f} MiB")
    print("labels of the first images:", ds.column("label")[:8].tolist())


if __name__ == "__main__":
    main(sys.argv[1])
