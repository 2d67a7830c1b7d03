"""lmdbloader.convert(): the converter, the same C++ code as `lmdbloader convert`.

Each option's name, default and check live once, in the C++ core
(``ConvertOptionList`` in include/lmdbloader/convert.h); keywords are turned
into the text the core parses, as the reader's are (``_options``).
"""

import os

from . import _core
from ._options import option_texts
from .errors import ConvertError

# name -> kind, from the core.
KINDS = {name: kind for name, kind, *_ in _core.convert_options()}


def convert(source, output, *, kind, **options):
    """Writes a corpus from ``source`` (see ``lmdbloader convert --help``) and
    returns the summary: outputs, records, bytes, seconds, skipped.

    ``kind``: image_folder, video_folder, jsonl or lmdb. Options, each as
    ``lmdbloader.convert_options()`` lists it with its default: overwrite,
    order (given, sorted, shuffle), seed, frame_step, num_shards, shard_index
    (None: every shard), skip_bad, progress, db, record (lmdb sources: as_is,
    caffe, msgpack or raw; include/lmdbloader/convert.h lists what each
    splits a value into). An unknown keyword is a
    TypeError; a value of the right type that the core refuses is a
    ConvertError. Bad input raises ConvertError (an lmdbloader.Error and a
    ValueError) naming the file or line; nothing is left at ``output`` then.
    """
    # kind is required: None (which option_texts reads as "the default") goes
    # to the table as the text 'None', which it refuses naming the kinds.
    given = dict(options, kind="None" if kind is None else kind, source=os.fspath(source), output=os.fspath(output))
    try:
        texts = option_texts(given, KINDS, "convert")
        return _core.convert(texts)
    except ValueError as e:  # the core's InvalidArgument: bad input or options
        raise ConvertError(str(e)) from None


def convert_options():
    """The converter's options: (name, kind, what it accepts, help, default) each."""
    return list(_core.convert_options())


def write_shard_list(folder):
    """Writes <folder>/shards.json for a complete set of shards; returns the record count."""
    return _core.write_shard_list(os.fspath(folder))
