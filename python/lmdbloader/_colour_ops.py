"""ImageDecode's colour transforms: torchvision's ``RandomApply([ColorJitter],
p)``, ``RandomGrayscale(p)``, ``RandomApply([GaussianBlur(k, sigma)], p)``
and ``RandomSolarize(threshold, p)`` as PIL images get them, their random
choices drawn with torch's generator in torchvision's order, applied in C++
to the resized crop (colour_ops.cc)."""

import math
import numbers

import numpy as np
import torch

from . import _core
from ._draws import generator
from ._image_checks import FLOAT32_MAX, is_number

#: The ops the C++ core applies, by the names it parses.
OP_NAMES = tuple(_core.image_options()["colour_ops"])
_JITTERED = ("brightness", "contrast", "saturation", "hue")


def probability(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{what} must be a probability from 0 to 1; got {value!r}")
    return float(value)


def jitter_range(value, what, center=1.0, bound=(0.0, FLOAT32_MAX)):
    """ColorJitter's ``_check_input``: a number v is [center - v, center + v]
    (clipped at 0 but for hue), a pair is (min, max); None where the range
    is the center alone (nothing drawn). ColorJitter's bound is (0, inf),
    but its draw, ``uniform_`` in float32, refuses an end past float32's
    largest at every image: that is the bound here."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"jitter's {what} must be a non-negative number or (min, max); got {value!r}")
        low, high = center - float(value), center + float(value)
        if what != "hue":
            low = max(low, 0.0)
    elif (isinstance(value, (tuple, list)) and len(value) == 2 and
          all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in value)):
        low, high = float(value[0]), float(value[1])
    else:
        raise ValueError(f"jitter's {what} must be a non-negative number or (min, max); got {value!r}")
    if not bound[0] <= low <= high <= bound[1]:
        raise ValueError(f"jitter's {what} must lie in [{bound[0]:g}, {bound[1]:g}] with min <= max; got {value!r}")
    return None if low == high == center else (low, high)


def blur_sigma_range(value):
    """GaussianBlur's ``sigma``: a positive number, or (min, max) with 0 <
    min <= max. Drawn by ``uniform_`` in float32, which refuses an end past
    float32's largest, and draws 0 (a kernel of nan) for an end below its
    smallest: both ends must be positive float32 numbers."""
    pair = (value, value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else value
    if (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(is_number(v) for v in pair) and
            0 < pair[0] <= pair[1] and np.float32(pair[0]) > 0):
        return float(pair[0]), float(pair[1])
    raise ValueError(f"blur_sigma must be positive, or (min, max) of positive numbers, within float32's range "
                     f"(about 1.4e-45 to 3.4e38); got {value!r}")


def blur_kernel_size(value):
    """GaussianBlur's ``kernel_size``: odd and positive (one size for both axes)."""
    max_kernel = _core.image_options()["max_blur_kernel"]
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 < value <= max_kernel or \
            value % 2 == 0:
        raise ValueError(f"blur_kernel must be an odd number from 1 to {max_kernel}; got {value!r}")
    return int(value)


class ColourDraws:
    """The colour options of an ImageDecode, checked, and each image's ops
    drawn from them: a list of (name, value) pairs for the C++ core."""

    def __init__(self, jitter=None, jitter_p=1.0, gray_p=0.0, solarize_p=0.0, solarize_threshold=128.0,
                 blur_p=0.0, blur_sigma=(0.1, 2.0), blur_kernel=9):
        self.jitter = jitter
        self.ranges = None
        if jitter is not None:
            if not isinstance(jitter, (tuple, list)) or len(jitter) not in (3, 4):
                raise ValueError(f"jitter must be (brightness, contrast, saturation[, hue]), as "
                                 f"ColorJitter takes them; got {jitter!r}")
            self.ranges = [jitter_range(v, what) for v, what in zip(jitter[:3], _JITTERED)]
            self.ranges.append(jitter_range(jitter[3], "hue", 0.0, (-0.5, 0.5)) if len(jitter) == 4 else None)
        self.jitter_p = probability(jitter_p, "jitter_p")
        self.gray_p = probability(gray_p, "gray_p")
        self.solarize_p = probability(solarize_p, "solarize_p")
        # Any number is a threshold (PIL's solarize: above 255 nothing
        # changes, at 0 or below every level does); one past float32's range
        # is not one the core can hold.
        if not is_number(solarize_threshold):
            raise ValueError(f"solarize_threshold must be a finite number within float32's range; "
                             f"got {solarize_threshold!r}")
        self.solarize_threshold = float(solarize_threshold)
        self.blur_p = probability(blur_p, "blur_p")
        self.blur_sigma, self.blur_kernel = blur_sigma_range(blur_sigma), blur_kernel_size(blur_kernel)

    def check_blur_fits(self, height, width, what="blurs"):
        """torchvision's GaussianBlur pads the image by reflection, kernel
        // 2 pixels a side, which torch refuses unless the pad is below the
        image's height and width: a blur that may be drawn (blur_p > 0) for
        a smaller image is refused here, naming both."""
        pad = self.blur_kernel // 2
        if self.blur_p > 0 and pad >= min(height, width):
            raise ValueError(f"blur_kernel {self.blur_kernel} is too large for the {width}x{height} images it "
                             f"{what}: torchvision's GaussianBlur pads by reflection, kernel // 2 = {pad} pixels, "
                             f"which torch refuses unless below each side (at most "
                             f"{2 * min(height, width) - 1} here)")

    @property
    def active(self):
        """Whether any image may get an op."""
        return ((self.ranges is not None and self.jitter_p > 0) or self.gray_p > 0 or self.solarize_p > 0 or
                self.blur_p > 0)

    def draw(self):
        """One image's ops, drawn as torchvision's transforms draw them in
        the order RandomApply(ColorJitter), RandomGrayscale,
        RandomApply(GaussianBlur), RandomSolarize (DINOv2's order); an op
        whose probability is 0 draws nothing (as ``flip=0``), one whose
        RandomApply probability is 1 draws no coin."""
        ops = []
        g = generator()
        # RandomApply: skipped when p < rand; p = 1 is ColorJitter alone (no draw).
        if self.ranges is not None and self.jitter_p > 0 and (self.jitter_p == 1.0 or
                                                               not self.jitter_p < torch.rand(1, generator=g)):
            order = torch.randperm(4, generator=g).tolist()
            factors = [None if r is None else float(torch.empty(1).uniform_(r[0], r[1], generator=g)) for r in self.ranges]
            ops += [(_JITTERED[i], factors[i]) for i in order if factors[i] is not None]
        if self.gray_p > 0 and torch.rand(1, generator=g) < self.gray_p:
            ops.append(("grayscale", 0.0))
        if self.blur_p > 0 and (self.blur_p == 1.0 or not self.blur_p < torch.rand(1, generator=g)):
            sigma = torch.empty(1).uniform_(self.blur_sigma[0], self.blur_sigma[1], generator=g).item()  # GaussianBlur.get_params
            ops.append(("blur", sigma, self.blur_kernel))
        if self.solarize_p > 0 and torch.rand(1, generator=g).item() < self.solarize_p:
            ops.append(("solarize", self.solarize_threshold))
        return ops

    def __repr__(self):
        return (f"jitter={self.jitter!r}, jitter_p={self.jitter_p}, gray_p={self.gray_p}, "
                f"solarize_p={self.solarize_p}, solarize_threshold={self.solarize_threshold}, "
                f"blur_p={self.blur_p}, blur_sigma={self.blur_sigma}, blur_kernel={self.blur_kernel}")


def apply_colour(pixels, ops):
    """A copy of ``pixels`` (uint8, (height, width, 3) or (height, width))
    with ``ops`` applied by the code ImageDecode runs on each image: a list
    of (name, value) pairs, ``name`` one of ``brightness``, ``contrast``,
    ``saturation``, ``hue`` (factors, as torchvision's adjust_* take them),
    ``grayscale`` (value unused) or ``solarize`` (the threshold); a blur is
    ``("blur", sigma, kernel)``."""
    out = np.array(pixels, dtype=np.uint8, order="C", copy=True)
    _core.apply_colour(out, [tuple(op) for op in ops])
    return out
