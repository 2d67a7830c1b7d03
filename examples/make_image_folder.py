"""Writes a small image-classification folder to try lmdbloader on:
ROOT/class_k/img_NNNN.jpg, JPEGs of random pixels (PIL).

    python3 examples/make_image_folder.py /tmp/photos [--images 512] [--classes 4]
"""

import argparse
import os

import numpy as np
from PIL import Image


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root")
    p.add_argument("--images", type=int, default=512)
    p.add_argument("--classes", type=int, default=4)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    for i in range(args.images):
        folder = os.path.join(args.root, f"class_{i % args.classes}")
        os.makedirs(folder, exist_ok=True)
        pixels = rng.integers(0, 255, size=(96, 96, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(os.path.join(folder, f"img_{i:04d}.jpg"), quality=85)
    print(f"wrote {args.images} images in {args.classes} classes under {args.root}")


if __name__ == "__main__":
    main()
