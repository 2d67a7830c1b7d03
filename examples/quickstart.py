"""The README's quick start: a corpus written by `lmdbloader convert` read in a
PyTorch DataLoader (2 persistent workers, 2 epochs) under a 64 MiB budget per
process, images decoded in the workers, batches through lmdbloader.collate.

    python3 examples/quickstart.py /tmp/photos.lmdb
"""

import io
import sys
import time

import numpy as np
import torch
from PIL import Image

import lmdbloader
from lmdbloader.memory import snapshot


def to_tensors(record):  # record: {"image": JPEG bytes, "label": int, "name": str}
    image = np.asarray(Image.open(io.BytesIO(record["image"])).convert("RGB"))
    return torch.from_numpy(image.copy()).permute(2, 0, 1), record["label"]


def main(path):
    ds = lmdbloader.LmdbDataset(path, rss_budget="64MiB", transform=to_tensors)
    loader = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True, num_workers=2,
                                         persistent_workers=True, collate_fn=lmdbloader.collate)
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
