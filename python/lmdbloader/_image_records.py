"""How an image (or a clip's frames) and its target come out of a record
(ImageDecode's ``record=``): targets, Caffe Datums, and PIL for what the
JPEG path does not decode."""

import io

import msgpack
import numpy as np

from . import _core
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


def split_datum(record, k, where):
    """A Caffe Datum: (the encoded image, or its raw pixels as RGB; the label)."""
    try:
        channels, height, width, data, label, encoded = _core.caffe_datum(record)
    except DecodeError as e:
        raise DecodeError(f"{image_name(where, k)}: {e}") from None
    target = 0 if label is None else label  # protobuf: an absent int32 is 0
    if encoded:
        return data, target
    return bgr_planes(data, channels, height, width, k, where), target


def bgr_planes(data, channels, height, width, k, where):
    """Caffe's raw pixels (channels x height x width bytes, BGR planes as
    OpenCV's) -> RGB pixels (height, width, 3)."""
    if channels not in (1, 3):
        raise DecodeError(f"{image_name(where, k)}: raw pixels of {channels} channels; 1 (gray) and 3 (BGR) decode")
    if height <= 0 or width <= 0 or len(data) != channels * height * width:
        raise DecodeError(f"{image_name(where, k)}: {len(data)} bytes of raw pixels for "
                          f"{channels} x {height} x {width}")
    planes = np.frombuffer(data, dtype=np.uint8).reshape(channels, height, width)
    if channels == 1:
        return np.repeat(planes[0][:, :, None], 3, axis=2)
    return np.ascontiguousarray(planes[::-1].transpose(1, 2, 0))


def converted_pixels(fields, k, where):
    """The raw pixels of a Datum as ``convert --record caffe`` writes them
    ({"pixels", "channels", "height", "width", "label"})."""
    dims = [fields.get(name) for name in ("channels", "height", "width")]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in dims):
        raise DecodeError(f"{image_name(where, k)}: a 'pixels' record needs integer channels, height and width")
    return bgr_planes(fields["pixels"], *dims, k, where)


def image_name(where, k):
    return where(k) if where is not None else f"image {k} of the batch"


def pil_size(data, where, k):
    image = _pil_open(data, where, k)
    return image.size


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


def unpack_record(record):
    """A msgpack record, also as msgpack-python before 1.0 wrote it: bytes as
    str (raw) values, which are not UTF-8 when they hold a JPEG (CoCLR's
    published LMDBs); such a record's keys are read back as text."""
    try:
        return msgpack.unpackb(record, raw=False)
    except UnicodeDecodeError:
        value = msgpack.unpackb(record, raw=True)
    if isinstance(value, dict):
        return {k.decode("utf-8", "replace") if isinstance(k, bytes) else k: v for k, v in value.items()}
    return value
