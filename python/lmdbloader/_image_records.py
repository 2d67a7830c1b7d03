"""What ImageDecode does around the C++ split of a record (image_record.h):
the batch's targets, names for errors, and PIL for what the JPEG path does
not decode."""

import io

import numpy as np

from .errors import DecodeError

class _NoTarget:
    """A record without a target (raw images, callables returning the image alone)."""

    def __repr__(self):
        return "<no target>"


NO_TARGET = _NoTarget()


def batch_targets(targets, where):
    """The batch's targets, or None when its records hold none; records of
    one batch must agree."""
    missing = [t is NO_TARGET for t in targets]
    if all(missing):
        return None
    if any(missing):
        k = missing.index(True)
        raise TypeError(f"{image_name(where, k)}: no target, where other records of the batch have one")
    return targets


def fn_name(fn):
    return getattr(fn, "__qualname__", None) or repr(fn)


def image_name(where, k):
    return where(k) if where is not None else f"image {k} of the batch"


def _pil_open(data, where, k):
    from PIL import Image
    try:
        return Image.open(io.BytesIO(data))
    except Exception as e:  # PIL's UnidentifiedImageError, DecompressionBombError, OSError
        raise DecodeError(f"{image_name(where, k)}: not a decodable image ({type(e).__name__}: {e})") from None


def pil_rgb(data, where, k):
    image = _pil_open(data, where, k)
    try:
        return np.asarray(image.convert("RGB"))
    except Exception as e:  # truncated or corrupt pixel data
        raise DecodeError(f"{image_name(where, k)}: the image does not decode ({type(e).__name__}: {e})") from None
