"""A record's trip through the image path, counted: every hand-over of the
record's bytes (or the images split out of them) from one file of the path
to another or to the core, and every time they come back to vision.py.

The path is: vision.py hands the batch to the core's split (stop 1), which
hands the images back (the one return); CropJobs takes them (stop 2) and
hands them to decode_crops (stop 3). Drawing the crops needs only each
image's width and height, so nothing else sees the data. A format the JPEG
path does not decode goes from CropJobs to PIL instead, whose pixels go on.

Counted by a profile hook (sys.setprofile) over one decode_records call, the
core's functions wrapped so that their calls show; "carries the data" is the
record itself, a memoryview into it, or a list or tuple holding one.
"""

import io
import os
import sys

import msgpack
import numpy as np
import pytest
from PIL import Image

import lmdbloader
from lmdbloader import _core

PACKAGE = os.path.dirname(lmdbloader.__file__)
VISION = os.path.join(PACKAGE, "vision.py")


def jpeg(width=96, height=72, seed=0):
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90)
    return out.getvalue()


def carries(value, record, depth=3):
    if value is record or (isinstance(value, memoryview) and value.obj is record):
        return True
    if depth and isinstance(value, (list, tuple)):
        return any(carries(v, record, depth - 1) for v in value)
    return False


def trip(decoder, records, monkeypatch):
    """(stops, returns) of records[0] through decoder.decode_records."""
    record = records[0]
    wrapper_code = None
    for name in ("split_image_records", "image_sizes", "decode_crops"):
        real = getattr(_core, name)

        def wrapped(*args, _real=real, **kw):
            return _real(*args, **kw)
        wrapper_code = wrapped.__code__
        monkeypatch.setattr(_core, name, wrapped)

    def place(frame):
        code = frame.f_code
        if code is wrapper_code:
            return "core"
        return code.co_filename if code.co_filename.startswith(PACKAGE) else None

    stops, returns, entered, open_stops = [], [], [False], set()

    def hook(frame, event, arg):
        if event == "call":
            if not entered[0]:
                entered[0] = frame.f_code.co_name == "decode_records"
                return
            here, there = place(frame), place(frame.f_back)
            if here is None or here == there:
                return
            # At its call a frame's locals are its arguments.
            if any(carries(v, record) for k, v in frame.f_locals.items() if k != "self"):
                stops.append(f"{os.path.basename(there or '?')} -> {frame.f_code.co_name} ({os.path.basename(here)})")
                open_stops.add(frame)
        elif event == "return" and frame in open_stops:
            open_stops.discard(frame)
            if place(frame.f_back) == VISION and carries(arg, record):
                returns.append(frame.f_code.co_name)

    sys.setprofile(hook)
    try:
        decoder.decode_records(records)
    finally:
        sys.setprofile(None)
    assert entered[0]
    return stops, returns


RECIPES = {
    "train": lambda: lmdbloader.ImageDecode(32),
    "eval, padded": lambda: lmdbloader.ImageDecode(64, train=False, resize=40),
    "multi-crop": lambda: lmdbloader.ImageDecode(crops=[lmdbloader.Crop(32, n=2), lmdbloader.Crop(16, n=3)]),
    "clip": lambda: lmdbloader.ClipDecode(32, frames=2, clips=2),
}


@pytest.mark.parametrize("recipe", RECIPES)
def test_a_record_stops_three_times_and_comes_back_once(recipe, monkeypatch):
    if recipe == "clip":
        records = [msgpack.packb({"frames": [jpeg(seed=k * 4 + f) for f in range(4)], "label": k}) for k in range(3)]
    else:
        records = [msgpack.packb({"image": jpeg(seed=k), "label": k}) for k in range(3)]
    stops, returns = trip(RECIPES[recipe](), records, monkeypatch)
    assert len(stops) <= 3 and len(returns) <= 1, f"stops {stops}, returns {returns}"
    # And the count sees the hand-overs: the split, CropJobs, the decode.
    assert [s.rsplit(" ", 1)[0].split(" -> ")[1] for s in stops] == ["wrapped", "__init__", "wrapped"], stops
    assert returns == ["wrapped"]


def test_a_pil_only_format_is_handed_to_pil_once(monkeypatch):
    """The third stop is PIL's decode; its pixels, not the record, go on
    to decode_crops."""
    png = io.BytesIO()
    Image.fromarray(np.zeros((40, 50, 3), np.uint8)).save(png, "PNG")
    records = [msgpack.packb({"image": png.getvalue(), "label": 0})]
    stops, returns = trip(lmdbloader.ImageDecode(32), records, monkeypatch)
    assert len(stops) == 3 and "pil_rgb" in stops[2] and len(returns) == 1, f"stops {stops}, returns {returns}"
