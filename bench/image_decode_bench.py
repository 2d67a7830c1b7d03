"""The ImageNet training transform per image, one thread: torchvision's PIL path
(open + convert RGB, RandomResizedCrop(224), RandomHorizontalFlip, ToTensor,
Normalize), step by step, against lmdbloader's fused decode_crops of the same
boxes into one float32 batch. Ratios are what to compare; absolute times vary
from machine to machine.

    python3 bench/image_photos.py /tmp/photos
    python3 bench/image_decode_bench.py /tmp/photos [--rounds 5]
"""

import argparse
import glob
import io
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
from torchvision_cpu import import_torchvision  # noqa: E402

from lmdbloader import _core  # noqa: E402

import_torchvision()
from PIL import Image  # noqa: E402
from torchvision.transforms import InterpolationMode, RandomResizedCrop  # noqa: E402
from torchvision.transforms import functional as F  # noqa: E402

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("photos")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    jpegs = [open(p, "rb").read() for p in sorted(glob.glob(os.path.join(args.photos, "*.jpg")))]
    torch.manual_seed(0)
    boxes, flips = [], []
    for b in jpegs:
        img = Image.open(io.BytesIO(b))
        i, j, h, w = RandomResizedCrop.get_params(img, (0.08, 1.0), (3 / 4, 4 / 3))
        boxes.append((j, i, w, h))
        flips.append(bool(torch.rand(1) < 0.5))
    n = len(jpegs)
    steps = {"decode": 0.0, "crop+resize": 0.0, "flip": 0.0, "to_tensor": 0.0, "normalize": 0.0}
    fused = {True: 0.0, False: 0.0}
    out = np.empty((n, 3, 224, 224), np.float32)
    for _ in range(args.rounds):
        for b, (left, top, w, h), flip in zip(jpegs, boxes, flips):
            t0 = time.perf_counter()
            img = Image.open(io.BytesIO(b)).convert("RGB")
            t1 = time.perf_counter()
            img = F.resized_crop(img, top, left, h, w, [224, 224], InterpolationMode.BILINEAR)
            t2 = time.perf_counter()
            if flip:
                img = F.hflip(img)
            t3 = time.perf_counter()
            t = F.to_tensor(img)
            t4 = time.perf_counter()
            F.normalize(t, MEAN, STD)
            t5 = time.perf_counter()
            for k, (a, z) in zip(steps, [(t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t5)]):
                steps[k] += z - a
        for scale in (True, False):
            t0 = time.perf_counter()
            _core.decode_crops(jpegs, [(i, box, flip, None, 0, i, None) for i, (box, flip) in enumerate(zip(boxes, flips))],
                               [(out, 224, 224)], "CHW", "float32", MEAN, STD, scale)
            fused[scale] += time.perf_counter() - t0
    per = lambda s: s / (n * args.rounds) * 1e3  # noqa: E731
    total = sum(steps.values())
    print(f"{n} photos, {args.rounds} rounds, ms an image:")
    for k, v in steps.items():
        print(f"  torchvision {k:12s} {per(v):6.3f}")
    print(f"  torchvision total        {per(total):6.3f}")
    for scale in (True, False):
        print(f"  lmdbloader fused, IDCT scaling {'on ' if scale else 'off'} {per(fused[scale]):6.3f}"
              f"   ({total / fused[scale]:.2f}x)")


if __name__ == "__main__":
    main()
