"""Photograph-like test images made from numbers (no files), their JPEGs and
corpora of them: one copy for the tests of the fused decode path."""

import io

import numpy as np
from PIL import Image


def photo(seed, width, height, noise=6):
    """A photograph-like image: smooth gradients, edges and a little noise
    (standard deviation `noise` levels)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    img = np.stack([
        128 + 100 * np.sin(x / (7 + seed % 11) + seed),
        128 + 100 * np.cos(y / (5 + seed % 7)),
        (x * 255 / max(width - 1, 1) + (y > height / 2) * 60) % 256,
    ], axis=-1)
    img += rng.normal(0, noise, img.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def jpeg(image, **options):
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=options.pop("quality", 90), **options)
    return buf.getvalue()


def image_folder_corpus(root, images, classes):
    """The corpus `convert --from image_folder` writes of ``images`` (encoded
    image bytes) laid out under ``root``/src, image i in class folder
    ``class_{i % classes}``; returns its path (``root``/corpus)."""
    import lmdbloader
    for i, data in enumerate(images):
        folder = root / "src" / f"class_{i % classes}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:03d}.jpg").write_bytes(data)
    out = str(root / "corpus")
    lmdbloader.convert(str(root / "src"), out, kind="image_folder")
    return out
