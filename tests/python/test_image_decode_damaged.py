"""Damaged JPEGs: the fused decoder (lmdbloader._core.decode_crops) refuses
exactly what PIL refuses (Image.open(...).convert("RGB") raising) and decodes
what PIL decodes, whatever the box.

The inputs are photographs (scikit-image's) encoded by PIL, then damaged with
fixed seeds: bytes set to random values, random spans overwritten, the data
cut short. libjpeg calls most damage inside the scan data a warning and goes
on; PIL, like the decoder here, ignores the warnings, and refuses what
libjpeg's error handler stops at (a marker that makes no sense after the
scan, a bad table) and data that ends before the last row. A box that stops
above the last row is decoded only down to its last row when the rest of the
scan runs into the end-of-image marker, and to the end otherwise, so damage
below it is refused too.

About 350 inputs, each decoded by PIL once and by decode_crops three times
(the whole image, two RandomResizedCrop boxes): 3 to 5 s. Run with -s to see
the counts.
"""

import io

import math

import numpy as np
import pytest
from PIL import Image

import lmdbloader

from crop_calls import decode_images, image_size

skimage_data = pytest.importorskip("skimage.data")

OUT = 32
# Inputs whose header claims more than this many pixels are left out: a
# damaged size field can claim megapixels that both decoders would walk.
MAX_PIXELS = 1 << 20


def encode(img, **kw):
    b = io.BytesIO()
    img.save(b, "JPEG", **kw)
    return b.getvalue()


def originals():
    """(name, jpeg): baseline 4:2:0 and 4:4:4, progressive, restart markers,
    gray; 160 to 240 pixels a side, so a few hundred decode in seconds."""
    out = []
    for name, longer, kw in (("astronaut", 240, dict(quality=90)),
                             ("coffee", 200, dict(quality=75, subsampling=0)),
                             ("chelsea", 220, dict(quality=90, progressive=True)),
                             ("rocket", 200, dict(quality=85, restart_marker_rows=1)),
                             ("camera", 180, dict(quality=90))):
        img = Image.fromarray(getattr(skimage_data, name)())
        s = longer / max(img.size)
        img = img.resize((round(img.width * s), round(img.height * s)), Image.BICUBIC)
        out.append((name, encode(img, **kw)))
    return out


def damaged(jpeg, rng):
    """One damaged copy of jpeg and what was done to it."""
    data = bytearray(jpeg)
    kind = int(rng.integers(3))
    if kind == 0:
        count = int(rng.integers(1, 5))
        for at in rng.integers(2, len(data), count):
            data[at] = int(rng.integers(256))
        return bytes(data), f"{count} bytes set"
    if kind == 1:
        length = int(rng.integers(1, 65))
        at = int(rng.integers(2, len(data) - length))
        data[at:at + length] = rng.integers(0, 256, length, dtype=np.uint8).tobytes()
        return bytes(data), f"{length} bytes at {at} overwritten"
    # A cut: mostly near the end, where a region decode would not look.
    keep = int(len(data) * (1 - rng.random() ** 3 * 0.9)) - 1
    return bytes(data[:keep]), f"cut to {keep} of {len(data)} bytes"


def random_resized_crop(width, height, rng):
    """(left, top, width, height) drawn as RandomResizedCrop.get_params draws
    them (scale 0.08-1, ratio 3/4-4/3), from numpy's generator."""
    for _ in range(10):
        area = width * height * rng.uniform(0.08, 1.0)
        ratio = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        w, h = round(math.sqrt(area * ratio)), round(math.sqrt(area / ratio))
        if 0 < w <= width and 0 < h <= height:
            return int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1)), w, h
    return 0, 0, width, height


def pil_decodes(data):
    try:
        Image.open(io.BytesIO(data)).convert("RGB")
        return True
    except Exception:  # OSError, UnidentifiedImageError, SyntaxError, DecompressionBombError...
        return False


def ours_decodes(data, box, grayscale=False):
    out = np.empty((1, 1 if grayscale else 3, OUT, OUT), np.float32)
    try:
        decode_images([data], [box], None, out, OUT, OUT, grayscale=grayscale)
        return True
    except lmdbloader.DecodeError:
        return False


@pytest.fixture(scope="module")
def inputs():
    """(label, damaged jpeg, width, height) for every input the fused decoder
    takes (a header it reads as a decodable JPEG or refuses), with PIL's verdict."""
    rng = np.random.default_rng(20261126)
    out, other = [], 0
    for name, jpeg in originals():
        for k in range(70):
            data, what = damaged(jpeg, rng)
            try:
                width, height, kind = image_size(data)
                is_jpeg = kind == "jpeg"
            except lmdbloader.DecodeError:
                width = height = 0
                is_jpeg = True  # refused by the header reader
            if not is_jpeg or width * height > MAX_PIXELS:
                other += 1  # ImageDecode hands these to PIL
                continue
            out.append((f"{name} #{k}: {what}", data, width, height, pil_decodes(data)))
    assert other < len(out) // 10
    return out


def check(inputs, boxes, grayscale=False):
    wrong = []
    for label, data, width, height, pil in inputs:
        for box in boxes(width, height):
            ours = ours_decodes(data, box, grayscale)
            if ours != pil:
                wrong.append(f"{label}, box {box}: PIL {'decodes' if pil else 'refuses'}, decode_crops "
                             f"{'decodes' if ours else 'refuses'}")
    return wrong


def test_a_whole_image_box_refuses_exactly_what_pil_refuses(inputs):
    wrong = check(inputs, lambda w, h: [(0, 0, w, h) if w else (0, 0, 1, 1)])
    refused = sum(not pil for *_, pil in inputs)
    print(f"\n{len(inputs)} damaged JPEGs, {refused} refused by PIL; {len(wrong)} disagreements")
    assert not wrong, "\n".join(wrong)
    # Damage of every kind is there to be caught.
    assert 0.2 * len(inputs) < refused < 0.8 * len(inputs)


def test_a_region_refuses_exactly_what_pil_refuses(inputs):
    """Damage below the box as well: PIL decodes every row."""
    rng = np.random.default_rng(7)
    wrong = check(inputs, lambda w, h: [random_resized_crop(w, h, rng) for _ in range(2)] if w else [])
    print(f"\n{2 * len(inputs)} region boxes: {len(wrong)} disagreements")
    assert not wrong, "\n".join(wrong)


def test_the_luma_alone_refuses_exactly_what_pil_refuses(inputs):
    """grayscale=True decodes a JPEG's Y plane alone (libjpeg skips its
    chroma's inverse DCT): the entropy-coded data of every component is
    still read, so damage anywhere is still found where PIL finds it."""
    rng = np.random.default_rng(11)
    wrong = check(inputs, lambda w, h: [(0, 0, w, h), random_resized_crop(w, h, rng)] if w else [(0, 0, 1, 1)],
                  grayscale=True)
    print(f"\n{2 * len(inputs)} gray decodes: {len(wrong)} disagreements")
    assert not wrong, "\n".join(wrong)
