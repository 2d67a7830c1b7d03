"""lmdbloader.convert(): the converter, the same C++ code as `lmdbloader convert`."""

import os

from . import _core
from .errors import ConvertError

_KINDS = ("image_folder", "video_folder", "jsonl", "lmdb")


def convert(source, output, *, kind, overwrite=False, order="sorted", seed=0, frame_step=1,
            num_shards=1, shard_index=None, skip_bad=False, progress=False, db=None):
    """Writes a corpus from ``source`` (see ``lmdbloader convert --help``) and
    returns the summary: outputs, records, bytes, seconds, skipped.

    Bad input or options raise ConvertError (an lmdbloader.Error and a
    ValueError) naming the file or line; nothing is left at ``output`` then.
    """
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {', '.join(_KINDS)}; got {kind!r}")
    # What the core's integer types carry; the shard limit is the core's (MAX_SHARDS).
    limits = {"seed": (seed, 0, 2**64 - 1), "frame_step": (frame_step, 1, 2**31 - 1),
              "num_shards": (num_shards, 1, _core.MAX_SHARDS)}
    if shard_index is not None:
        limits["shard_index"] = (shard_index, 0, _core.MAX_SHARDS - 1)
    for what, (value, low, high) in limits.items():
        if isinstance(value, bool) or not isinstance(value, int) and not hasattr(value, "__index__"):
            raise ConvertError(f"{what} must be an integer, got {type(value).__name__}")
        if not low <= int(value) <= high:
            raise ConvertError(f"{what} must be between {low} and {high}, got {value}")
    try:
        return _core.convert(kind, os.fspath(source), os.fspath(output), bool(overwrite), order,
                             int(seed), int(frame_step), int(num_shards),
                             -1 if shard_index is None else int(shard_index), bool(skip_bad),
                             bool(progress), db or "")
    except ValueError as e:  # the core's InvalidArgument: bad input or options
        raise ConvertError(str(e)) from None


def write_shard_list(folder):
    """Writes <folder>/shards.json for a complete set of shards; returns the record count."""
    return _core.write_shard_list(os.fspath(folder))
