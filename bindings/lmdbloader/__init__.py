"""lmdbloader: read LMDB datasets under a per-process memory budget.

- :class:`Reader`: records by position or key, batches, views, stats.
- :class:`LmdbDataset`: a torch map-style Dataset (needs torch; imported lazily).
- :class:`LocalitySampler`: a shuffle that reads neighbouring records together (cold corpora).
- :mod:`lmdbloader.compat`: py-lmdb's read-only API on top of Reader.
- :mod:`lmdbloader.memory`: RSS / PSS / USS of a process tree, sampled and plotted.
- :func:`convert`: writes corpora (the same C++ code as ``lmdbloader convert``).
"""

from . import _core
from .errors import (ConvertError, CorruptedError, DecodeError, Error, ReadonlyError,
                     UnsupportedError)
from ._convert import convert, write_shard_list
from .reader import Reader
from .sampler import LocalitySampler
from .writer import CorpusWriter

__version__ = _core.__version__

__all__ = ["Reader", "CorpusWriter", "LmdbDataset", "LocalitySampler", "convert", "write_shard_list", "Error", "CorruptedError", "UnsupportedError",
           "DecodeError", "ReadonlyError", "ConvertError", "__version__"]


def __getattr__(name):
    # torch is needed only by LmdbDataset; importing lmdbloader must not need it.
    if name == "LmdbDataset":
        from .dataset import LmdbDataset
        return LmdbDataset
    raise AttributeError(f"module 'lmdbloader' has no attribute {name!r}")
