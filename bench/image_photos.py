"""Writes the photographs bench/image_bench.cc decodes: scikit-image's bundled
colour photos re-encoded the way an ImageNet-style corpus holds them (JPEG
quality 90, 4:2:0, the longer side 350 to 500 pixels).

    python3 bench/image_photos.py /tmp/photos
    build/bench/image_bench /tmp/photos
"""

import os
import sys

import numpy as np
from PIL import Image
import skimage.data

PHOTOS = ["astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "immunohistochemistry",
          "retina", "stereo_motorcycle", "colorwheel"]


def main(out):
    os.makedirs(out, exist_ok=True)
    total = 0
    for k, name in enumerate(PHOTOS):
        pixels = getattr(skimage.data, name)()
        if isinstance(pixels, tuple):  # stereo pairs
            pixels = pixels[0]
        img = Image.fromarray(np.ascontiguousarray(pixels[..., :3]))
        for longer in (500, 375):
            scale = longer / max(img.size)
            size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
            path = os.path.join(out, f"{name}-{longer}.jpg")
            img.resize(size, Image.BICUBIC).save(path, "JPEG", quality=90)
            total += os.path.getsize(path)
    count = 2 * len(PHOTOS)
    print(f"{count} photos in {out}, {total / count / 1024:.0f} KiB on average")


if __name__ == "__main__":
    main(sys.argv[1])
