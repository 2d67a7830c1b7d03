"""LmdbDataset: a map-style torch Dataset over an LMDB database or corpus."""

import copy
import operator

import numpy as np
import torch
import torch.utils.data

from ._decoding import decoding_for
from .atomistic import layout_of
from .batches import ring_stats
from .reader import Reader
from .samples import BoundSamples, samples_of
from .vision import ImageDecode

_DECODERS = ("msgpack", "raw", "tensor")


class LmdbDataset(torch.utils.data.Dataset):
    """Map-style Dataset: ``ds[i]`` is record i, decoded and transformed.

    ``decode``: "msgpack" (decoded in C++ into dicts, lists, bytes, ints,
    floats, str), "raw" (the record's bytes), "tensor" (the record's bytes as
    a 1-D uint8 tensor, read straight into it; a batch's records are read
    together, and under :class:`lmdbloader.DataLoader` straight into shared
    memory, no tensor per record)
    or a callable taking bytes; an :class:`lmdbloader.ImageDecode` or
    :class:`lmdbloader.ClipDecode` decodes a batch's images in one C++ call,
    and under :class:`lmdbloader.DataLoader` straight into shared memory.
    ``views=True`` hands a callable ``decode`` a zero-copy read-only
    memoryview of the record instead (mode="mmap", which it implies for
    mode="auto"): no copy out of the page cache, the checksum checked in
    place; an ImageDecode or ClipDecode reads its records itself and
    refuses it. ``transform`` is applied to the decoded record. ``__getitems__`` fetches a
    whole batch in one C++ call (the DataLoader uses it automatically).
    Labels and names stay in the file: use :meth:`column` and :meth:`name`
    instead of Python lists, so forked workers copy nothing on read.

    ``keys``: the dataset's samples are these keys of the database (str or
    bytes), in this order, instead of every record (e.g. a split file's
    videos, leaving out metadata records such as ``__keys__``); a key that
    is not in the database is a KeyError here, naming the first few.
    ``targets``: one number per sample (per key, or per record without
    ``keys``), returned beside each sample instead of what the record holds:
    ``(image, target)`` with an image decoder, ``(record, target)``
    otherwise. Both are held as numpy arrays (never a Python list, which
    forked workers would copy page by page as they read it).
    ``samples``: each sample is several records named by key patterns, a
    :class:`lmdbloader.KeyedSamples`, or ``"ocr"``: the layout
    ``create_lmdb_dataset.py`` writes (``image-%09d``, ``label-%09d``,
    ``num-samples``), sample i the tuple (image, label str) of number i + 1;
    over a set of files (a folder of OCR sets, as ``MJ/``) each file's
    samples with its own count, one file after the other. The first record of a sample goes through ``decode`` (e.g.
    ``ImageDecode(32, record="raw")``) and ``transform``, the others are
    bytes or str; keys are formatted as samples are read, nothing per sample
    is held (KeyedSamples: what is checked at open, and the cost).
    ``samples="deepmd"`` (DeePMD-kit's deepmd/lmdb, as dpdata writes it) and
    ``samples="aselmdb"`` (ASE's LMDB database, fairchem's ``.aselmdb``):
    sample i is frame i, or the i-th live row in id order, as a dict whose
    arrays are numpy arrays, counts and ids taken from the file
    (:class:`lmdbloader.DeepmdFrames`, :class:`lmdbloader.AseDbRows`: what
    is checked, and how to pass a size column); :meth:`sizes` gives the atoms
    of each, for :class:`lmdbloader.SizeBatchSampler`. They decode their
    records themselves (``decode`` left as it is) and then ``transform``.
    ``samples`` excludes ``keys``, ``targets`` and ``views``.
    The other keyword arguments are the reader options of
    :class:`lmdbloader.Reader` (rss_budget, mode, lock, db, index_dir,
    skip_bad_files, index_mode, verify_checksums, io_engine, queue_depth,
    cache, mmap_window, remap_every).
    """

    def __init__(self, path, *, decode="msgpack", transform=None, views=False, keys=None, targets=None,
                 samples=None, **reader_options):
        if not (callable(decode) or decode in _DECODERS):
            raise ValueError(f"decode must be 'msgpack', 'raw', 'tensor' or a callable; got {decode!r}")
        if views and not callable(decode):
            raise ValueError(f"views=True hands records to a decode callable; decode is {decode!r}")
        if views and isinstance(decode, ImageDecode):
            raise ValueError(f"views=True hands a decode callable zero-copy views of the records; "
                             f"{type(decode).__name__} reads a batch's records itself and takes none (several "
                             "crops of each image: ImageDecode(crops=[lmdbloader.Crop(...), ...]))")
        mode = reader_options.get("mode")
        if views and mode in (None, "auto"):
            reader_options["mode"] = mode = "mmap"
        if views and mode != "mmap":
            raise ValueError(f"views=True needs mode='mmap'; got mode={mode!r}")
        if transform is not None and not callable(transform):
            raise TypeError("transform must be callable")
        frames = layout_of(samples)
        if frames is not None and decode != "msgpack":
            raise ValueError(f"samples={frames.name!r} decodes its records itself; decode={decode!r} does not "
                             f"combine with it (use transform=)")
        if samples is not None:
            samples = samples_of(samples) if frames is None else frames
            given = [name for name, value in (("keys", keys is not None), ("targets", targets is not None),
                                              ("views", views)) if value]
            if given:
                raise ValueError(f"samples= names each sample's records; it does not combine with {given[0]}=")
        self.reader = Reader(path, **reader_options)
        self.decode = decode
        self.transform = transform
        self.views = bool(views)
        self._decoding = decoding_for(self.reader, decode, transform, self.views, self._call)
        self._deferred = False
        self._positions = None if keys is None else _positions_of(self.reader, keys)
        # Several records a sample: a few ints, keys formatted on each read.
        self._keyed = None if samples is None or frames is not None else BoundSamples(samples, self.reader)
        # Atomistic frames: positions computed, a few numbers per file held.
        self._frames = None if frames is None else frames.bind(self.reader)
        self._targets = None if targets is None else _targets_of(targets, len(self), self.reader.path)

    @property
    def _several(self):
        return self._keyed is not None and self._keyed.slots > 1

    def _position(self, index):
        """The reader's position of sample ``index`` (IndexError outside)."""
        index = _index(index)
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"sample {index} out of range: {self.reader.path} has {n} samples")
        index = int(index) % n
        if self._frames is not None:
            return int(self._frames.positions(np.array([index], dtype=np.int64))[0])
        if self._keyed is not None:
            return self._keyed.positions([index], first_only=True)[0][0]
        return index if self._positions is None else int(self._positions[index])

    def _picked(self, indices):
        """(the reader's positions of these samples, their targets or None).
        Without keys or targets a sample is its record: the indices go to
        the reader as they are (it checks them), nothing per index here."""
        if self._positions is None and self._targets is None and self._keyed is None:
            return indices, None
        picked = _index_array(indices, len(self), self.reader.path)
        if self._keyed is not None:  # one record a sample: its key's position
            return self._keyed.positions(picked.tolist(), first_only=True)[0], None
        positions = picked if self._positions is None else self._positions[picked]
        return positions.tolist(), (None if self._targets is None else self._targets[picked].tolist())

    def with_deferred_batches(self):
        """A copy (same reader) whose ``__getitems__`` returns its batches not
        yet read (:class:`lmdbloader.batches.RecordBatch` for
        decode="tensor", :class:`lmdbloader.batches.DecodedBatch` for an
        image decoder), which :class:`lmdbloader.Collate` reads or decodes in
        a worker straight into a ring slot; None when this dataset's batches
        cannot wait (a transform, or another decode). :class:`DataLoader`
        calls it."""
        if self._frames is not None or not self._decoding.deferrable_with(self._targets, self._several):
            return None
        other = copy.copy(self)
        other._deferred = True
        return other

    def decodes_without_python(self):
        """Whether a batch of this dataset is read and decoded with no Python
        of the caller's per sample and the GIL released: decode="raw",
        "tensor", or an ImageDecode / ClipDecode with a built-in record
        layout, and no transform or samples= (what ``DataLoader(...,
        worker_method="auto")`` runs in threads)."""
        if self.transform is not None or self._keyed is not None or self._frames is not None or self.views:
            return False
        if isinstance(self.decode, ImageDecode):
            return not callable(self.decode.record)
        return self.decode in ("raw", "tensor")

    def __len__(self):
        if self._frames is not None:
            return self._frames.count
        if self._keyed is not None:
            return self._keyed.count
        return len(self.reader) if self._positions is None else len(self._positions)

    def expect_share(self, share, in_chunks=False):
        """:meth:`Reader.expect_share` for ``share`` of this dataset's samples
        (those given by ``keys=`` a part of the file's records)."""
        part = 1.0 if self._positions is None else len(self._positions) / max(len(self.reader), 1)
        self.reader.expect_share(min(1.0, share * part), in_chunks)

    def __getitem__(self, index):
        if self._frames is not None:
            return self._frame_samples([_index(index)])[0]
        if self._several:
            return self._several_records([_index(index)])[0]
        positions, targets = self._picked([index])
        return self._decoding.one(positions[0], None if targets is None else targets[0])

    def _call(self, fn, record, index):
        """fn(record); what fn raises goes on with a note naming the record
        and file (Python 3.11+), as in batches."""
        try:
            return fn(record)
        except Exception as e:
            if hasattr(e, "add_note"):
                e.add_note(f"lmdbloader: raised on {self.reader.where(index)}")
            raise

    def __getitems__(self, indices):
        if self._frames is not None:
            return self._frame_samples(indices)
        if self._several:
            return self._several_records(indices)
        positions, targets = self._picked(indices)
        return self._decoding.batch(positions, targets, self._deferred)

    def _frame_samples(self, indices):
        """Atomistic samples: the batch's records read in one call, each
        decoded by its layout, then transformed."""
        picked = _index_array(indices, len(self), self.reader.path)
        positions = self._frames.positions(picked)
        records = self.reader.get_batch(positions.tolist())
        samples = self._frames.decode(records, positions, picked)
        if self.transform is None:
            return samples
        return [self._call(self.transform, s, p) for s, p in zip(samples, positions.tolist())]

    def sizes(self):
        """The atoms of each sample of ``samples="deepmd"`` or
        ``"aselmdb"`` as a read-only int64 numpy array (deepmd's
        ``frame_nlocs``; else read once and saved where the record index is
        saved, or the column file the layout was given)."""
        if self._frames is None:
            raise TypeError("sizes() is the atoms of each sample of samples='deepmd' or 'aselmdb'")
        return self._frames.sizes()

    @property
    def layout_metadata(self):
        """The file's own metadata for ``samples="deepmd"`` or
        ``"aselmdb"`` (deepmd's ``__metadata__`` without its per-frame
        lists, aselmdb's ``metadata``), or None."""
        return None if self._frames is None else self._frames.metadata

    def _several_records(self, indices):
        """Samples of several records: (the first through decode and
        transform, *the others), every record of the batch read in one call
        (two for "msgpack": the first records decoded in C++)."""
        picked = _index_array(indices, len(self), self.reader.path).tolist()
        firsts, others = self._keyed.positions(picked)
        return self._decoding.several(firsts, others, self._keyed.values, self._deferred)

    def state_dict(self):
        """What a resumed ``torchdata`` ``StatefulDataLoader`` needs to draw
        what the interrupted run would have drawn next: the torch generator
        of the process that reads (the boxes, flips and colour of
        ImageDecode, ClipDecode and their views come from it). The loader
        takes it in each worker, batch by batch."""
        return {"torch_rng_state": torch.get_rng_state()}

    def load_state_dict(self, state):
        """Restores :meth:`state_dict`'s generator in a DataLoader worker.
        Outside one (``num_workers=0``) the draws come from the main
        process's generator, which the training script's own checkpoint
        restores (``torch.set_rng_state``): it is left alone here."""
        if not isinstance(state, dict):
            raise TypeError(f"state must be what state_dict() returned; got {type(state).__name__}")
        rng = state.get("torch_rng_state")
        if rng is not None and torch.utils.data.get_worker_info() is not None:
            torch.set_rng_state(rng)

    def column(self, name):
        """A metadata column (e.g. "label") as a read-only numpy array, one
        value per record of the file (with ``keys``: index it with
        :meth:`positions`)."""
        return self.reader.column(name)

    def positions(self):
        """The file's record position of each sample (a read-only int64
        array): ``keys``' positions, the first record's of each of
        ``samples`` (found now, a key check or lookup each), or 0..len-1."""
        if self._frames is not None:
            positions = self._frames.positions(np.arange(len(self), dtype=np.int64))
            positions.flags.writeable = False
            return positions
        if self._keyed is not None:
            positions = np.array(self._keyed.positions(range(len(self)), first_only=True)[0], dtype=np.int64)
            positions.flags.writeable = False
            return positions
        if self._positions is None:
            return np.arange(len(self), dtype=np.int64)
        return self._positions

    def name(self, index):
        return self.reader.name(self._position(index))

    @property
    def manifest(self):
        return self.reader.manifest

    def stats(self):
        """The reader's stats, and under "batch_rings" what this process received
        through lmdbloader.collate's shared-memory rings (lmdbloader.ring_stats())."""
        return {**self.reader.stats(), "batch_rings": ring_stats()}


def _positions_of(reader, keys):
    """The reader's position of each key, as an int64 array; KeyError naming
    the first few keys that are not in the database."""
    if isinstance(keys, (str, bytes)):
        raise TypeError("keys must be a sequence of keys (str or bytes), not one key")
    try:
        count = len(keys)
    except TypeError:
        raise TypeError(f"keys must be a sequence of keys (str or bytes); got {type(keys).__name__}") from None
    positions = np.empty(count, dtype=np.int64)
    missing = []
    for j, key in enumerate(keys):
        if isinstance(key, np.bytes_):
            key = bytes(key)
        elif isinstance(key, np.str_):
            key = str(key)
        if not isinstance(key, (str, bytes)):
            raise TypeError(f"keys[{j}] is {type(key).__name__}; keys are str or bytes")
        try:
            positions[j] = reader.index_of(key)
        except KeyError:
            missing.append(key)
            if len(missing) > 5:
                break
    if missing:
        shown = ", ".join(repr(k) for k in missing[:5])
        raise KeyError(f"{'more than 5' if len(missing) > 5 else len(missing)} of the {count} keys are not in "
                       f"{reader.path}: {shown}")
    positions.flags.writeable = False
    return positions


def _targets_of(targets, count, path):
    """targets as a read-only 1-D numeric numpy array of `count` values."""
    if isinstance(targets, (str, bytes)):
        raise TypeError("targets must be a sequence of numbers")
    array = np.asarray(targets)
    if array.dtype == object or not (np.issubdtype(array.dtype, np.integer) or
                                     np.issubdtype(array.dtype, np.floating) or array.dtype == np.bool_):
        raise TypeError(f"targets must be numbers; got an array of {array.dtype}")
    if array.ndim != 1 or len(array) != count:
        raise ValueError(f"targets must hold one number per sample: {count} for {path}; got shape {array.shape}")
    array = array.copy()
    array.flags.writeable = False
    return array


def _index_array(indices, n, path):
    """Sample indices as an int64 array in [0, n): integers only (numpy's
    too, never bools or floats), negatives from the end; IndexError outside."""
    array = np.asarray(indices)
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer) or array.ndim != 1:
        raise TypeError(f"sample indices are integers; got {indices!r:.80}")
    if array.min() < -n or array.max() >= n:
        bad = array[(array < -n) | (array >= n)][0]
        raise IndexError(f"sample {bad} out of range: {path} has {n} samples")
    return np.where(array < 0, array + n, array).astype(np.int64, copy=False)


def _index(index):
    """A sample index as an int: integers only (numpy's too), never a bool or
    a float, as Reader and lists refuse them."""
    if isinstance(index, bool):
        raise TypeError("a sample index is an integer, not a bool")
    try:
        return operator.index(index)
    except TypeError:
        raise TypeError(f"a sample index is an integer; got {type(index).__name__}") from None
