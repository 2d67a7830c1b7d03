"""The checks of the image decoders' options (vision.py, _views.py): sizes,
(min, max) ranges and per-channel numbers, refused with ValueErrors that
name the option and what it takes.

Every number an option holds reaches torch's float32 draws (``uniform_``
refuses bounds past float32's range at every draw, naming no option) or
the C++ core's float32 arithmetic, so a number outside float32's finite
range is refused here, when the decoder is made, naming the option."""

import math
import numbers

import numpy as np
import torch

from . import _core

MAX_SIDE = _core.image_options()["max_side"]
#: The largest finite float32: the most any option's number may be.
FLOAT32_MAX = float(np.finfo(np.float32).max)


def is_number(v):
    """A real number (not a bool) within float32's finite range."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and abs(v) <= FLOAT32_MAX


def side_pair(value, what):
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value, value)
    if (not isinstance(value, (tuple, list)) or len(value) != 2 or
            not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and 0 < v <= MAX_SIDE for v in value)):
        raise ValueError(f"{what} must be a positive integer or (height, width) up to {MAX_SIDE}; got {value!r}")
    return int(value[0]), int(value[1])


def value_range(value, what, low):
    if (not isinstance(value, (tuple, list)) or len(value) != 2 or
            not all(is_number(v) and v > low for v in value) or value[0] > value[1]):
        raise ValueError(f"{what} must be (min, max) with {low} < min <= max, finite in float32; got {value!r}")
    return float(value[0]), float(value[1])


def ratio_range(value, what):
    """RandomResizedCrop's ``ratio``: torchvision draws ``exp(uniform_(log
    min, log max))`` in the default dtype, so both ends must keep a finite,
    non-zero log and exp in float32 (1e-46 becomes 0, whose log is -inf;
    3.4e38's exp comes back inf), and a range whose crops are all empty
    (an aspect beyond twice the largest side each way) is no range."""
    low, high = value_range(value, what, 0.0)
    back = torch.exp(torch.log(torch.tensor((low, high), dtype=torch.float32)))
    if not (torch.isfinite(back).all() and (back > 0).all()):
        raise ValueError(f"{what} must be (min, max) of aspect ratios whose log and exp torch draws in float32 "
                         f"(about 1.4e-45 to 3.4e38); got {value!r}")
    widest = 2.0 * (MAX_SIDE + 1)
    if low > widest or high < 1.0 / widest:
        raise ValueError(f"{what} {value!r} leaves every crop empty: an image of at most {MAX_SIDE} pixels a side "
                         f"has no crop of an aspect beyond {widest:g} (or below 1/{widest:g})")
    return low, high


def finite_values(value, what, positive=False, count=3):
    if count == 1 and isinstance(value, numbers.Real):
        value = (value,)
    if (not isinstance(value, (tuple, list)) or len(value) != count or
            not all(is_number(v) and (v > 0 or not positive) for v in value)):
        raise ValueError(f"{what} must be {'three finite numbers' if count == 3 else 'one finite number'}"
                         f"{' above 0' if positive else ''} (float32's range); got {value!r}")
    return tuple(float(v) for v in value)


def normalization(mean, std):
    """Normalize's mean and std, checked as the core uses them: each level
    becomes level * (1 / (255 std)) + (-mean / std) in float32, so both must
    stay finite there (torchvision refuses a std that is 0 in float32; one
    of 1e-42 is not 0 but its scale is inf, every output inf or nan)."""
    for m, s in zip(mean, std):
        m32, s32 = float(np.float32(m)), float(np.float32(s))
        if s32 == 0 or abs(1.0 / (255.0 * s32)) > FLOAT32_MAX:
            raise ValueError(f"std {s!r} is too small: 1 / (255 * std) must be finite in float32 "
                             f"(std at least {1.0 / (255.0 * FLOAT32_MAX):.3g}); got std={tuple(std)!r}")
        if abs(m32 / s32) > FLOAT32_MAX:
            raise ValueError(f"mean {m!r} over std {s!r} is past float32's range: mean / std must be finite in "
                             f"float32; got mean={tuple(mean)!r}, std={tuple(std)!r}")
