"""How LmdbDataset makes samples of records: one strategy per ``decode=``
kind, chosen once when the dataset opens (:func:`decoding_for`), so a read
asks no question about the kind.

Each strategy answers three reads: one sample (``ds[i]``), a batch
(``__getitems__``, the records of a batch read in one call) and a batch of
samples of several records each (``samples=``). ``call(fn, record,
position)`` runs a user's function with the record and file named in what
it raises; ``deferred`` asks for a batch not yet read or decoded, which
:class:`lmdbloader.Collate` reads or decodes in a worker straight into a
shared-memory ring slot (only where ``deferrable_with`` says it may wait).
"""

import torch

from .batches import DecodedBatch, RecordBatch
from .vision import ImageDecode


class Decoding:
    """Records through ``decode`` (a callable here), then ``transform``."""

    def __init__(self, reader, decode, transform, views, call):
        self.reader = reader
        self.decode = decode
        self.transform = transform
        self.views = views
        self.call = call

    def deferrable_with(self, targets, several):
        """Whether a batch may wait for lmdbloader.Collate (LmdbDataset's
        with_deferred_batches), given the dataset's targets (or None) and
        whether its samples are of several records."""
        return False

    def transformed(self, records, positions):
        if self.transform is None:
            return records
        return [self.call(self.transform, r, i) for r, i in zip(records, positions)]

    def one(self, position, target):
        """The sample at ``position``: the record decoded and transformed,
        with ``target`` beside it when there is one."""
        record = self.record(position)
        sample = self.call(self.transform, record, position) if self.transform is not None else record
        return sample if target is None else (sample, target)

    def record(self, position):
        if self.views:
            record = self.call(self.decode, self.reader.view(position), position)
            self.reader.check_mappings()  # decode read zeros if the file shrank meanwhile
            return record
        return self.call(self.decode, self.reader[position], position)

    def batch(self, positions, targets, deferred):
        samples = self.samples(positions, deferred)
        return samples if targets is None else list(zip(samples, targets))

    def samples(self, positions, deferred):
        # Read a chunk at a time, each raw record dropped as soon as it is
        # decoded and transformed (Reader.apply_batch).
        if self.transform is None:
            return self.reader.apply_batch(positions, self.decode, views=self.views)
        return self.reader.apply_batch(positions, self.decoded_and_transformed, views=self.views)

    def decoded_and_transformed(self, raw):
        return self.transform(self.decode(raw))

    def several(self, firsts, others, values, deferred):
        """Samples of several records: (the first decoded and transformed,
        *the others as ``values`` makes them), every record read in one call."""
        heads, rest = self.heads(firsts, others)
        heads = self.transformed(heads, firsts)
        return [(h, *r) for h, r in zip(heads, values(rest, others))]

    def heads(self, firsts, others):
        """(the first records decoded, the other records' bytes)."""
        records = self.reader.get_batch(firsts + others)
        heads, rest = records[:len(firsts)], records[len(firsts):]
        return [self.call(self.decode, h, i) for h, i in zip(heads, firsts)], rest


class RawRecords(Decoding):
    """decode="raw": the record's bytes."""

    def record(self, position):
        return self.reader[position]

    def samples(self, positions, deferred):
        if self.transform is None:
            return self.reader.get_batch(positions)
        return self.reader.apply_batch(positions, self.transform, views=False)

    def heads(self, firsts, others):
        records = self.reader.get_batch(firsts + others)
        return records[:len(firsts)], records[len(firsts):]


class MsgpackRecords(Decoding):
    """decode="msgpack": decoded in C++ into Python objects."""

    def record(self, position):
        return self.reader.decode(position)

    def samples(self, positions, deferred):
        return self.reader.decode_batch(positions, self.transform)

    def several(self, firsts, others, values, deferred):
        heads = self.reader.decode_batch(firsts, self.transform)  # transformed as decoded
        return [(h, *r) for h, r in zip(heads, values(self.reader.get_batch(others), others))]


class TensorRecords(Decoding):
    """decode="tensor": each record read straight into a uint8 tensor."""

    def deferrable_with(self, targets, several):
        # A batch of tensors waits only as a plain batch: Collate's ring
        # slot has no room for targets or other records beside it.
        return self.transform is None and targets is None and not several

    def record(self, position):
        record = torch.empty(self.reader.value_size(position), dtype=torch.uint8)
        self.reader.read_into([position], [record.numpy()])
        return record

    def samples(self, positions, deferred):
        records = RecordBatch(self.reader, positions)
        if deferred:  # lmdbloader.DataLoader: its collate reads them into shared memory
            return records
        return self.transformed(records.tensors(), positions)

    def heads(self, firsts, others):
        sizes = self.reader.value_sizes(firsts + others)
        count = len(firsts)
        heads = [torch.empty(s, dtype=torch.uint8) for s in sizes[:count]]
        rest = [bytearray(s) for s in sizes[count:]]
        self.reader.read_into(firsts + others, [h.numpy() for h in heads] + rest)
        return heads, [bytes(r) for r in rest]


class FusedImages(Decoding):
    """An ImageDecode (or ClipDecode): a batch's images decoded in one C++
    call, (image, target) samples, or the image where there is no target."""

    def deferrable_with(self, targets, several):
        return self.transform is None

    def one(self, position, target):
        return self.batch([position], None if target is None else [target], False)[0]

    def batch(self, positions, targets, deferred):
        if deferred:  # lmdbloader.DataLoader: its collate decodes them into shared memory
            return DecodedBatch(self.reader, self.decode, positions, targets)
        if self.transform is None:
            return DecodedBatch(self.reader, self.decode, positions, targets).samples()
        # With targets given, the transform sees the image alone, as with
        # every other decode.
        samples = DecodedBatch(self.reader, self.decode, positions, None if targets is None else [None] * len(positions))
        samples = samples.samples()
        if targets is not None:
            return list(zip(self.transformed([image for image, _ in samples], positions), targets))
        return self.transformed(samples, positions)

    def several(self, firsts, others, values, deferred):
        batch = DecodedBatch(self.reader, self.decode, firsts, others=(others, values))
        if deferred:  # lmdbloader.DataLoader: its collate decodes them into shared memory
            return batch
        samples = batch.samples()
        if self.transform is None:
            return samples
        return [(self.call(self.transform, s[0], i), *s[1:]) for s, i in zip(samples, firsts)]


def decoding_for(reader, decode, transform, views, call):
    """The strategy for ``decode``: "msgpack", "raw", "tensor", an
    ImageDecode or another callable."""
    if isinstance(decode, ImageDecode):
        kind = FusedImages
    else:
        kind = {"msgpack": MsgpackRecords, "raw": RawRecords, "tensor": TensorRecords}.get(decode, Decoding)
    return kind(reader, decode, transform, views, call)
