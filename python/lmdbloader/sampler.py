"""LocalitySampler: a shuffle that reads neighbouring records together.

A perfect shuffle over a corpus that is not in the page cache makes one small
random read per record: 2 KiB records run at the device's 4 KiB IOPS. This
sampler shuffles *blocks* of records that lie next to each other in the file
(by default the records of one 2 MiB chunk), then shuffles the records of
``window`` consecutive blocks among themselves. Each block is read once per
epoch as one large request (with ``cache="fill"``, which reads 2 MiB chunks
whole) and stays in the page cache only while its window is being consumed,
so corpora bigger than RAM are read at the device's sequential speed.

``window`` trades shuffle quality for request size: a batch draws its records
from ``window`` blocks, so with records written class by class (as
``lmdbloader convert`` writes image folders) a batch mixes fewer classes than
a perfect shuffle would. docs/NOTES.md, "A shuffle for corpora bigger than RAM",
measures both.
"""

import math
import operator

import numpy as np

from ._options import byte_size


class LocalitySampler:
    """Indices of ``data_source`` (an :class:`lmdbloader.Reader` or
    :class:`lmdbloader.LmdbDataset`) in a block-local shuffled order.

    ``block_bytes``: records whose file positions fall in the same aligned
    span of this many bytes form a block (default "2MiB", the chunk that
    ``cache="fill"`` reads). ``window``: blocks whose records are shuffled
    together. ``seed`` and :meth:`set_epoch` fix the order, as with
    ``DistributedSampler``: the same (seed, epoch) gives the same order in
    every process, and resuming a ``StatefulDataLoader`` replays it exactly.
    ``num_replicas``/``rank`` split each epoch's order into contiguous,
    disjoint parts of equal length (padded by repeating the first indices,
    or cut with ``drop_last``), so each rank reads whole windows.
    """

    def __init__(self, data_source, *, block_bytes="2MiB", window=8, seed=0, num_replicas=1, rank=0,
                 drop_last=False):
        reader = getattr(data_source, "reader", data_source)
        if not hasattr(reader, "record_positions"):
            raise TypeError("data_source must be an lmdbloader.Reader or LmdbDataset, "
                            f"got {type(data_source).__name__}")
        self.block_bytes = byte_size(block_bytes, "block_bytes")
        if self.block_bytes < 1:
            raise ValueError("block_bytes must be at least 1 byte")
        self.window = _positive_int(window, "window")
        self.num_replicas = _positive_int(num_replicas, "num_replicas")
        self.rank = operator.index(rank)
        if not 0 <= self.rank < self.num_replicas:
            raise ValueError(f"rank must be in [0, {self.num_replicas}), got {self.rank}")
        self.seed = operator.index(seed)
        self.drop_last = bool(drop_last)
        self.epoch = 0
        positions = reader.record_positions()
        if callable(getattr(data_source, "positions", None)):  # LmdbDataset(keys=...): its samples' records
            positions = positions[data_source.positions()]
        self._n = len(positions)
        # Records grouped by block, each block's records in file order.
        order = np.argsort(positions, kind="stable")
        blocks = positions[order] // np.uint64(self.block_bytes)
        starts = np.flatnonzero(np.r_[True, blocks[1:] != blocks[:-1]]) if self._n else np.zeros(0, np.int64)
        self._records = order.astype(np.int64)
        self._block_starts = np.r_[starts, self._n].astype(np.int64)
        if self.drop_last:
            self._per_rank = self._n // self.num_replicas
        else:
            self._per_rank = math.ceil(self._n / self.num_replicas)

    @property
    def num_blocks(self):
        return len(self._block_starts) - 1

    def set_epoch(self, epoch):
        self.epoch = operator.index(epoch)

    def epoch_order(self):
        """The whole epoch's order, before the split across ranks (numpy int64)."""
        rng = np.random.default_rng([self.seed, self.epoch])
        block_order = rng.permutation(self.num_blocks)
        starts, ends = self._block_starts[:-1], self._block_starts[1:]
        out = np.empty(self._n, dtype=np.int64)
        at = 0
        for w in range(0, len(block_order), self.window):
            group = block_order[w:w + self.window]
            members = np.concatenate([self._records[starts[b]:ends[b]] for b in group])
            rng.shuffle(members)
            out[at:at + len(members)] = members
            at += len(members)
        return out

    def __iter__(self):
        order = self.epoch_order()
        total = self._per_rank * self.num_replicas
        if total > len(order):  # pad as DistributedSampler does
            reps = math.ceil(total / max(len(order), 1))
            order = np.tile(order, reps)[:total]
        mine = order[self.rank * self._per_rank:(self.rank + 1) * self._per_rank]
        return iter(mine.tolist())

    def __len__(self):
        return self._per_rank


def _positive_int(value, what):
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int")
    value = operator.index(value)
    if value < 1:
        raise ValueError(f"{what} must be at least 1, got {value}")
    return value
