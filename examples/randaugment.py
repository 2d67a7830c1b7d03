"""RandAugment after the fused decode, MixUp/CutMix on the batch.

RandAugment and TrivialAugment are not fused: ImageDecode gives each
sample's uint8 crop (RandomResizedCrop and flip done in C++, from the JPEG's
box only), a per-sample transform runs torchvision's v2 RandAugment on it in
the worker, then scales and normalizes; MixUp and CutMix mix the batch after
the loader (timm does them on the GPU). With --bench, the same job against
the all-Python path (the record's JPEG through PIL, RandomResizedCrop,
flip, RandAugment, ToTensor, Normalize), alternating, 2 persistent workers.

    python3 examples/randaugment.py /tmp/photos.lmdb            # a few batches
    python3 examples/randaugment.py /tmp/photos.lmdb --bench    # images/s, both paths
"""

import argparse
import io
import os
import sys
import time

import torch

import lmdbloader

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from torchvision_cpu import import_torchvision  # noqa: E402  (torchvision beside a CPU torch)

import_torchvision()
from torchvision.transforms import v2  # noqa: E402

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
AFTER = v2.Compose([v2.RandAugment(num_ops=2, magnitude=9), v2.ToDtype(torch.float32, scale=True),
                    v2.Normalize(MEAN, STD)])


def augment(sample):
    """(uint8 [3, 224, 224], label) from ImageDecode -> (normalized float32, label)."""
    image, label = sample
    return AFTER(image), label


class PythonPath(torch.utils.data.Dataset):
    """The all-Python path: the record's JPEG through PIL and torchvision."""

    def __init__(self, path):
        self.records = lmdbloader.LmdbDataset(path)  # msgpack records: {"image", "label", "name"}
        self.pipeline = v2.Compose([v2.PILToTensor(), v2.RandomResizedCrop(224, antialias=True),
                                    v2.RandomHorizontalFlip(), v2.RandAugment(num_ops=2, magnitude=9),
                                    v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])

    def __len__(self):
        return len(self.records)

    def __getitem__(self, i):
        from PIL import Image
        record = self.records[i]
        return self.pipeline(Image.open(io.BytesIO(record["image"])).convert("RGB")), record["label"]


def fused(path):
    decode = lmdbloader.ImageDecode(224, dtype=torch.uint8)  # RandomResizedCrop + flip, uint8 CHW
    return lmdbloader.LmdbDataset(path, decode=decode, transform=augment)


def loader(dataset, workers=2):
    return torch.utils.data.DataLoader(dataset, batch_size=32, shuffle=True, num_workers=workers,
                                       persistent_workers=workers > 0, drop_last=True)


def images_per_s(data, epochs=3):
    """Images/s over epochs 2 and on (the first starts the workers)."""
    seen, start = 0, None
    for epoch in range(epochs):
        if epoch == 1:
            seen, start = 0, time.perf_counter()
        for images, _ in data:
            seen += len(images)
    return seen / (time.perf_counter() - start)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", help="a corpus of {image, label} records (examples/make_image_folder.py, convert)")
    ap.add_argument("--bench", action="store_true", help="images/s against the all-Python path")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    classes = int(max(lmdbloader.Reader(args.corpus).column("label"))) + 1
    mix = v2.RandomChoice([v2.MixUp(num_classes=classes), v2.CutMix(num_classes=classes)])
    if not args.bench:
        for k, (images, labels) in enumerate(loader(fused(args.corpus))):
            images, targets = mix(images, labels)  # soft targets [32, classes]; on the GPU in a real job
            print(f"batch {k}: {tuple(images.shape)} {images.dtype}, targets {tuple(targets.shape)}")
            if k == 2:
                break
        return
    jobs = {"fused + RandAugment": loader(fused(args.corpus)),
            "PIL + torchvision + RandAugment": loader(PythonPath(args.corpus)),
            "fused alone (no RandAugment)": loader(lmdbloader.LmdbDataset(args.corpus,
                                                                          decode=lmdbloader.ImageDecode(224)))}
    rates = {name: [] for name in jobs}
    for _ in range(args.rounds):
        for name, data in jobs.items():
            rates[name].append(images_per_s(data))
    for name, r in rates.items():
        print(f"{name}: " + ", ".join(f"{x:.0f}" for x in r) + " images/s")
    fast, slow, alone = rates.values()
    print("fused + RandAugment against the all-Python path, per round: " +
          ", ".join(f"{a / b:.2f}x" for a, b in zip(fast, slow)))
    print("RandAugment's cost in the fused path, ms an image a worker: " +
          ", ".join(f"{2e3 / a - 2e3 / b:.2f}" for a, b in zip(fast, alone)))


if __name__ == "__main__":
    main()
