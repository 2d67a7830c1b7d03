"""The checks of the image decoders' options (vision.py, _views.py): sizes,
(min, max) ranges and per-channel numbers, refused with ValueErrors that
name the option and what it takes."""

import math
import numbers

from . import _core

MAX_SIDE = _core.image_options()["max_side"]


def side_pair(value, what):
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value, value)
    if (not isinstance(value, (tuple, list)) or len(value) != 2 or
            not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and 0 < v <= MAX_SIDE for v in value)):
        raise ValueError(f"{what} must be a positive integer or (height, width) up to {MAX_SIDE}; got {value!r}")
    return int(value[0]), int(value[1])


def value_range(value, what, low):
    if (not isinstance(value, (tuple, list)) or len(value) != 2 or
            not all(isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and v > low
                    for v in value) or value[0] > value[1]):
        raise ValueError(f"{what} must be (min, max) with {low} < min <= max; got {value!r}")
    return float(value[0]), float(value[1])


def finite_values(value, what, positive=False, count=3):
    if count == 1 and isinstance(value, numbers.Real):
        value = (value,)
    if (not isinstance(value, (tuple, list)) or len(value) != count or
            not all(isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and
                    (v > 0 or not positive) for v in value)):
        raise ValueError(f"{what} must be {'three finite numbers' if count == 3 else 'one finite number'}"
                         f"{' above 0' if positive else ''}; got {value!r}")
    return tuple(float(v) for v in value)
