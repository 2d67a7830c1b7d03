"""Where torchvision's recipes cut an image: RandomResizedCrop's draws and
Resize + CenterCrop's box (with its padding), as boxes of the source that
the fused decoder resamples to the output."""

import math
import numbers
import threading
from typing import NamedTuple

import torch

from ._draws import generator


# Below the public options, whose sizes are torchvision's (height, width),
# every size and place is x before y, as the decoder takes them.
class Size(NamedTuple):
    width: int
    height: int


class Point(NamedTuple):
    x: int
    y: int


class Box(NamedTuple):
    """A region of the source image, in source pixels (fractional where a
    resize scales the crop back to the source)."""
    left: float
    top: float
    width: float
    height: float


class CropPlan(NamedTuple):
    """How one image (or every frame of one clip) becomes an output: `box`
    resampled to `inner` at `at` of the output (the whole output, but where
    CenterCrop pads), mirrored where `flip`, with `colour` (drawn colour
    ops, or None)."""
    box: Box
    inner: Size
    at: Point
    flip: bool
    colour: object


_log_ratios = {}
_draw = threading.local()


def _log_ratio(ratio):
    """torchvision's ``torch.log(torch.tensor(ratio))``, as the two floats
    that ``uniform_`` receives (of the default dtype's precision), computed
    once per ratio and dtype."""
    key = (tuple(ratio), torch.get_default_dtype())
    got = _log_ratios.get(key)
    if got is None:
        got = _log_ratios[key] = tuple(float(v) for v in torch.log(torch.tensor(ratio)))
    return got


def random_resized_crop_box(width, height, scale, ratio):
    """torchvision's ``RandomResizedCrop.get_params`` for an image of this
    size: (top, left, height, width), drawn with torch's generator in the same
    order and the same kernels (10 tries of area and log-ratio, then a center
    crop of the ratio clamped to ``ratio``). One reused tensor per thread
    instead of two new ones a try: a try that fails (most of them, for
    scale (0.9, 1) on a square image) costs half as much."""
    area = height * width
    lo, hi = _log_ratio(ratio)
    s0, s1 = scale[0], scale[1]
    one = getattr(_draw, "tensor", None)
    if one is None or one.dtype != torch.get_default_dtype():
        # torchvision's torch.empty(1) takes the default dtype, and a float64
        # tensor draws 64 bits a value: follow it.
        one = _draw.tensor = torch.empty(1)
    g = generator()
    for _ in range(10):
        target_area = area * one.uniform_(s0, s1, generator=g).item()
        aspect = torch.exp(one.uniform_(lo, hi, generator=g)).item()
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            top = torch.randint(0, height - h + 1, size=(1,), generator=g).item()
            left = torch.randint(0, width - w + 1, size=(1,), generator=g).item()
            return top, left, h, w
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        h, w = height, int(round(height * max(ratio)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def random_resized_crop(width, height, scale, ratio):
    """random_resized_crop_box's draw as a Box."""
    top, left, h, w = random_resized_crop_box(width, height, scale, ratio)
    return Box(float(left), float(top), float(w), float(h))


def eval_resize(size, resize, crop_pct, max_side):
    """What evaluation's ``Resize`` gets: an int, the shorter side (default:
    the shorter of ``size`` x 256 / 224; with ``crop_pct``, timm's
    ``floor(shorter of size / crop_pct)``), or (height, width), the image
    squashed to that size whatever its aspect (torchvision's Resize of a
    pair: the OCR recipes' ``Resize((32, 128))``)."""
    def side(v, what):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 0 < v <= max_side:
            raise ValueError(f"{what} must be an integer from 1 to {max_side}, or (height, width) of them; "
                             f"got {resize!r}")
        return int(v)
    if crop_pct is not None:
        if resize is not None:
            raise ValueError("give resize or crop_pct, not both")
        if isinstance(crop_pct, bool) or not isinstance(crop_pct, numbers.Real) or not 0 < crop_pct <= 1:
            raise ValueError(f"crop_pct must lie in (0, 1]; got {crop_pct!r}")
        # The shorter side it resizes to must be one the decoder makes.
        least = min(size) / max_side
        if min(size) / crop_pct >= max_side + 1:
            raise ValueError(f"crop_pct {crop_pct!r} resizes the shorter side to {min(size) / crop_pct:.6g} "
                             f"pixels, beyond {max_side}: for size {tuple(size)} crop_pct must be at least "
                             f"{least:.6g}")
        resize = math.floor(min(size) / crop_pct)
    if resize is None:
        resize = int(round(min(size) * 256 / 224))
    if isinstance(resize, (tuple, list)) and len(resize) == 2:
        return (side(resize[0], "resize"), side(resize[1], "resize"))
    return side(resize, "resize (the shorter side before the center crop)")


def resize_center_crop_plan(width, height, resize, size):
    """torchvision's ``Resize(resize)`` then ``CenterCrop(size)`` as a Box of
    the source, the Size that box is resampled to, and the Point where that
    lands in the (height, width) = ``size`` output. Where the output is larger than
    the resized image along an axis, CenterCrop pads it with zeros: the box
    then spans the whole source along that axis, is resampled to the resized
    image's length, and lands at torchvision's padding offset (the left or
    top pad, ``(out - new) // 2``); elsewhere the box is the crop and fills
    the output. ``resize`` (height, width) squashes the image to that size."""
    if isinstance(resize, tuple):
        new_h, new_w = resize
    else:
        short, long = (width, height) if width <= height else (height, width)
        new_short, new_long = resize, int(resize * long / short)
        new_w, new_h = (new_short, new_long) if width <= height else (new_long, new_short)
    out_h, out_w = size
    sx, sy = width / new_w, height / new_h

    def axis(new, out, scale, length):
        if out > new:  # padded: the whole axis, resampled to the resized length
            # new * (length / new) may round an ulp past the image's edge.
            return 0.0, min(new * scale, length), new, (out - new) // 2
        start = int(round((new - out) / 2.0))
        return start * scale, out * scale, out, 0

    left, box_w, inner_w, x = axis(new_w, out_w, sx, width)
    top, box_h, inner_h, y = axis(new_h, out_h, sy, height)
    return Box(left, top, box_w, box_h), Size(inner_w, inner_h), Point(x, y)

