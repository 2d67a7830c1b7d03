"""lmdbloader: read LMDB datasets under a per-process memory budget.

- :class:`Reader`: records by position or key, batches, views, stats.
- :class:`LmdbDataset`: a torch map-style Dataset (needs torch; imported lazily).
- :data:`collate`, :class:`Collate`, :class:`DataLoader`: tensor batches from DataLoader workers
  through a bounded ring of reused shared memory (need torch; imported lazily).
- :class:`ImageDecode`, :class:`ClipDecode`: images and clips decoded, cropped, resized and
  normalized in C++ straight into the batch, with torchvision's semantics (need torch);
  ``ImageDecode(crops=[Crop(...), ...])``: several crops of each image from one decode.
- :class:`KeyedSamples`: samples of several records named by key patterns
  (``LmdbDataset(samples=...)``; ``samples="ocr"``: create_lmdb_dataset.py's layout).
- :class:`LocalitySampler`: a shuffle that reads neighbouring records together (cold corpora).
- :class:`DeepmdFrames`, :class:`AseDbRows`: atomistic corpora as their tools write them
  (``LmdbDataset(samples="deepmd" | "aselmdb")``); :class:`SizeBatchSampler`: batches by atoms.
- :mod:`lmdbloader.compat`: py-lmdb's read-only API on top of Reader.
- :mod:`lmdbloader.memory`: RSS / PSS / USS of a process tree, sampled and plotted.
- :func:`convert`: writes corpora (the same C++ code as ``lmdbloader convert``).
"""

from . import _dependencies  # noqa: F401  (first: names a missing numpy or msgpack)
from ._extension import core as _core  # noqa: F401  (names an extension built for another Python)
from .errors import (ConvertError, CorruptedError, DecodeError, Error, ReadonlyError,
                     UnsupportedError)
from ._convert import convert, convert_options, write_shard_list
from .reader import Reader
from .atomistic import AseDbRows, DeepmdFrames
from .sampler import LocalitySampler
from .size_sampler import SizeBatchSampler
from .samples import KeyedSamples
from .writer import CorpusWriter

__version__ = _core.__version__

__all__ = ["Reader", "CorpusWriter", "LmdbDataset", "collate", "Collate", "DataLoader", "ring_stats",
           "ImageDecode", "ClipDecode", "Crop", "KeyedSamples", "LocalitySampler", "DeepmdFrames", "AseDbRows",
           "SizeBatchSampler", "convert", "convert_options", "write_shard_list", "Error", "CorruptedError", "UnsupportedError",
           "DecodeError", "ReadonlyError", "ConvertError", "__version__"]
_NEED_TORCH = {"LmdbDataset": "dataset", "collate": "batches", "Collate": "batches", "DataLoader": "batches",
               "ring_stats": "batches", "ImageDecode": "vision", "ClipDecode": "vision", "Crop": "vision",
               "View": "_multi_crop"}


def __getattr__(name):
    # torch is needed only by these; importing lmdbloader must not need it.
    if name in _NEED_TORCH:
        import importlib
        module = importlib.import_module(f".{_NEED_TORCH[name]}", __name__)
        # View: Crop's former name, with a DeprecationWarning.
        return module.former_name(name, __name__) if name == "View" else getattr(module, name)
    raise AttributeError(f"module 'lmdbloader' has no attribute {name!r}")
