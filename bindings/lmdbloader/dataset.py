"""LmdbDataset: a map-style torch Dataset over an LMDB database or corpus."""

import copy

import torch
import torch.utils.data

from .batches import DecodedBatch, RecordBatch, ring_stats
from .reader import Reader
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
    place. ``transform`` is applied to the decoded record. ``__getitems__`` fetches a
    whole batch in one C++ call (the DataLoader uses it automatically).
    Labels and names stay in the file: use :meth:`column` and :meth:`name`
    instead of Python lists, so forked workers copy nothing on read.
    The other keyword arguments are the reader options of
    :class:`lmdbloader.Reader` (rss_budget, mode, lock, db, index_dir,
    verify_checksums, io_engine, queue_depth, cache, mmap_window, remap_every).
    """

    def __init__(self, path, *, decode="msgpack", transform=None, views=False, **reader_options):
        if not (callable(decode) or decode in _DECODERS):
            raise ValueError(f"decode must be 'msgpack', 'raw', 'tensor' or a callable; got {decode!r}")
        if views and not callable(decode):
            raise ValueError(f"views=True hands records to a decode callable; decode is {decode!r}")
        mode = reader_options.get("mode")
        if views and mode in (None, "auto"):
            reader_options["mode"] = mode = "mmap"
        if views and mode != "mmap":
            raise ValueError(f"views=True needs mode='mmap'; got mode={mode!r}")
        if transform is not None and not callable(transform):
            raise TypeError("transform must be callable")
        self.reader = Reader(path, **reader_options)
        self.decode = decode
        self.transform = transform
        self.views = bool(views)
        self._deferred = False

    def with_deferred_batches(self):
        """A copy (same reader) whose ``__getitems__`` returns its batches not
        yet read (:class:`lmdbloader.batches.RecordBatch` for
        decode="tensor", :class:`lmdbloader.batches.DecodedBatch` for an
        image decoder), which :class:`lmdbloader.Collate` reads or decodes in
        a worker straight into a ring slot; None when this dataset's batches
        cannot wait (a transform, or another decode). :class:`DataLoader`
        calls it."""
        if self.transform is not None or not (isinstance(self.decode, ImageDecode) or self.decode == "tensor"):
            return None
        other = copy.copy(self)
        other._deferred = True
        return other

    def __len__(self):
        return len(self.reader)

    def _decoded(self, indices):
        """A fused decoder's samples of these records: (image, target) or
        the image, decoded in one call."""
        samples = DecodedBatch(self.reader, self.decode, indices).samples()
        if self.transform is None:
            return samples
        return [self._call(self.transform, x, i) for x, i in zip(samples, indices)]

    def __getitem__(self, index):
        if isinstance(self.decode, ImageDecode):
            return self._decoded([index])[0]
        if self.decode == "msgpack":
            record = self.reader.decode(index)
        elif self.decode == "tensor":
            record = torch.empty(self.reader.value_size(index), dtype=torch.uint8)
            self.reader.read_into([index], [record.numpy()])
        elif self.views:
            record = self._call(self.decode, self.reader.view(index), index)
            self.reader.check_mappings()  # decode read zeros if the file shrank meanwhile
        else:
            record = self.reader[index]
            if callable(self.decode):
                record = self._call(self.decode, record, index)
        return self._call(self.transform, record, index) if self.transform is not None else record

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
        if isinstance(self.decode, ImageDecode):
            if self._deferred:  # lmdbloader.DataLoader: its collate decodes them into shared memory
                return DecodedBatch(self.reader, self.decode, indices)
            return self._decoded(indices)
        if self.decode == "msgpack":
            return self.reader.decode_batch(indices, self.transform)
        if self.decode == "tensor":
            records = RecordBatch(self.reader, indices)
            if self._deferred:  # lmdbloader.DataLoader: its collate reads them into shared memory
                return records
            tensors = records.tensors()
            if self.transform is None:
                return tensors
            return [self._call(self.transform, t, i) for t, i in zip(tensors, indices)]
        if not callable(self.decode) and self.transform is None:
            return self.reader.get_batch(indices)
        # Read a chunk at a time, each raw record dropped as soon as it is
        # decoded and transformed (Reader.apply_batch); one Python call per
        # record where decode or transform alone is set.
        if self.transform is None:
            fn = self.decode
        elif not callable(self.decode):
            fn = self.transform
        else:
            fn = self._decode_raw
        return self.reader.apply_batch(indices, fn, views=self.views)

    def _decode_raw(self, raw):
        record = self.decode(raw) if callable(self.decode) else raw
        return self.transform(record) if self.transform is not None else record

    def column(self, name):
        """A metadata column (e.g. "label") as a read-only numpy array."""
        return self.reader.column(name)

    def name(self, index):
        return self.reader.name(index)

    @property
    def manifest(self):
        return self.reader.manifest

    def stats(self):
        """The reader's stats, and under "batch_rings" what this process received
        through lmdbloader.collate's shared-memory rings (lmdbloader.ring_stats())."""
        return {**self.reader.stats(), "batch_rings": ring_stats()}
