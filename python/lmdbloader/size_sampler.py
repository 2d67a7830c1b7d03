"""SizeBatchSampler: batches by a per-record size (atoms a frame).

Atomistic training batches by atoms, not by frames: fairchem fills each
batch up to ``max_atoms``, DeePMD-kit batches frames of one atom count
together (its ``max:N`` rule: ``N // nloc`` frames of ``nloc`` atoms). This
sampler does both over a size column (``LmdbDataset.sizes()``, or any 1-D
integer array), held as a numpy array, never a Python list.
"""

import array
import numbers
import operator

import numpy as np

from ._size_column import checked_column

_OVERSIZE = ("error", "alone")


class SizeBatchSampler:
    """Batches of sample indices (lists of ints) for a DataLoader's
    ``batch_sampler=``, by size.

    ``sizes``: the size of each sample (a 1-D integer array, or a dataset
    with ``sizes()`` such as ``LmdbDataset(path, samples="aselmdb")``).
    ``max_size``: the most a batch may hold in all; without ``equal_sizes``
    each batch takes samples in the epoch's order while their sum stays
    within it (fairchem's ``max_atoms``). ``equal_sizes=True``: every batch
    holds samples of one size, ``batch_size`` of them, or
    ``max(1, max_size // size)`` (DeePMD-kit's ``max:N``), the batches
    shuffled together. ``oversize``: what a sample larger than ``max_size``
    does: "error" (a ValueError here naming the first, its size and
    ``max_size``; default) or "alone" (a batch of its own, the only batches
    then over ``max_size``).

    ``shuffle``/``seed``/:meth:`set_epoch` fix the order as
    ``DistributedSampler`` does: the same (seed, epoch) gives the same
    batches in every process. ``num_replicas``/``rank``: rank r takes
    batches r, r + num_replicas, ...; every sample is in exactly one batch of
    one rank an epoch. Batches are split in two (the ones holding the most
    samples first) until their number is a multiple of ``num_replicas``, so
    every rank has the same ``len()``; ``drop_last=True`` drops the last
    batches instead (fewer samples, batches never split). :meth:`state_dict`
    and :meth:`load_state_dict` resume mid-epoch: the next iteration yields
    exactly the batches the interrupted one had not.

    Cost: each epoch's batches are planned when it starts (every rank plans
    the whole epoch, as ``DistributedSampler`` permutes it): a numpy
    permutation, then one search a batch to fill, or one stable sort to
    group. Measured at 10^7 samples of 10-200 atoms, max_size=5000, on 2
    loaded cores: 2.9 s filling, 2.2 s grouping (0.2-0.3 us a sample);
    what is held is the epoch's order (8 bytes a sample), the sizes twice
    (8 + 2 bytes) and two ints a batch.
    """

    def __init__(self, sizes, max_size=None, *, batch_size=None, equal_sizes=False, shuffle=True, seed=0,
                 num_replicas=1, rank=0, drop_last=False, oversize="error"):
        column = sizes.sizes() if callable(getattr(sizes, "sizes", None)) else sizes
        column = np.asarray(column)
        self.sizes = checked_column(column, len(column), "sizes")
        self.max_size = None if max_size is None else _positive_int(max_size, "max_size")
        self.batch_size = None if batch_size is None else _positive_int(batch_size, "batch_size")
        self.equal_sizes = bool(equal_sizes)
        if self.equal_sizes and self.max_size is None and self.batch_size is None:
            raise ValueError("equal_sizes=True needs batch_size or max_size")
        if not self.equal_sizes and self.batch_size is not None:
            raise ValueError("batch_size is for equal_sizes=True; batches filled by size take max_size")
        if not self.equal_sizes and self.max_size is None:
            raise ValueError("max_size is needed to fill batches by size (or pass equal_sizes=True)")
        if oversize not in _OVERSIZE:
            raise ValueError(f"oversize must be 'error' or 'alone'; got {oversize!r}")
        self.oversize = oversize
        if self.max_size is not None and oversize == "error" and len(self.sizes):
            over = np.flatnonzero(self.sizes > self.max_size)
            if len(over):
                first = int(over[0])
                raise ValueError(f"{len(over)} samples are larger than max_size={self.max_size}, the first sample "
                                 f"{first} of size {int(self.sizes[first])}; pass oversize='alone' to give each "
                                 f"a batch of its own")
        # Planning gathers and sorts the sizes each epoch: in the narrowest
        # dtype that holds them, which numpy's stable sort radix-sorts
        # (10^7 sizes: 0.66 s against 2.6 s as int64).
        top = int(self.sizes.max()) if len(self.sizes) else 0
        self._narrow = self.sizes.astype(np.uint16 if top < 1 << 16 else np.uint32 if top < 1 << 32 else np.int64)
        self.shuffle = bool(shuffle)
        self.seed = operator.index(seed)
        self.num_replicas = _positive_int(num_replicas, "num_replicas")
        self.rank = operator.index(rank)
        if not 0 <= self.rank < self.num_replicas:
            raise ValueError(f"rank must be in [0, {self.num_replicas}), got {self.rank}")
        self.drop_last = bool(drop_last)
        self.epoch = 0
        self._skip = 0  # batches of this epoch already yielded before a resume
        self._yielded = 0
        self._plan = None

    def set_epoch(self, epoch):
        epoch = operator.index(epoch)
        if epoch != self.epoch:
            self.epoch, self._skip, self._yielded = epoch, 0, 0

    def epoch_batches(self):
        """The whole epoch's batches, before the split across ranks, as
        (order, starts, ends): batch b is ``order[starts[b]:ends[b]]``."""
        if self._plan is not None and self._plan[0] == self.epoch:
            return self._plan[1]
        n = len(self.sizes)
        rng = np.random.default_rng([self.seed, self.epoch])
        order = rng.permutation(n) if self.shuffle else np.arange(n, dtype=np.int64)
        if self.equal_sizes:
            order, starts, ends = self._equal_batches(order, rng)
        else:
            starts, ends = self._filled_batches(order)
        starts, ends = self._for_ranks(starts, ends)
        plan = (order.astype(np.int64, copy=False), starts, ends)
        self._plan = (self.epoch, plan)
        return plan

    def _filled_batches(self, order):
        """Greedy fill in the epoch's order: a batch ends before the sample
        that would take its sum past max_size."""
        totals = np.cumsum(self._narrow[order], dtype=np.int64)
        # Two machine ints a batch (array), not Python objects.
        starts, ends = array.array("q"), array.array("q")
        start, n, base = 0, len(order), 0
        while start < n:
            end = int(np.searchsorted(totals, base + self.max_size, side="right"))
            if end == start:  # larger than max_size alone: oversize="alone"
                end = start + 1
            starts.append(start)
            ends.append(end)
            base = int(totals[end - 1])
            start = end
        return np.frombuffer(starts, dtype=np.int64).copy(), np.frombuffer(ends, dtype=np.int64).copy()

    def _equal_batches(self, order, rng):
        """Samples grouped by size (each group in the epoch's order), cut
        into batches of the group's count, the batches then shuffled."""
        order = order[np.argsort(self._narrow[order], kind="stable")]
        sorted_sizes = self.sizes[order]
        bounds = np.flatnonzero(np.r_[True, sorted_sizes[1:] != sorted_sizes[:-1]]) if len(order) else \
            np.zeros(0, np.int64)
        group_ends = np.r_[bounds[1:], len(order)]
        starts = []
        for first, end in zip(bounds.tolist(), group_ends.tolist()):
            size = int(sorted_sizes[first])
            per = self.batch_size if self.batch_size is not None else max(1, self.max_size // max(size, 1))
            starts.append(np.arange(first, end, per, dtype=np.int64))
        starts = np.concatenate(starts) if starts else np.zeros(0, np.int64)
        ends = np.r_[starts[1:], len(order)].astype(np.int64)  # groups lie one after the other
        if self.shuffle:
            shuffled = rng.permutation(len(starts))
            starts, ends = starts[shuffled], ends[shuffled]
        return order, starts, ends

    def _for_ranks(self, starts, ends):
        """Batches whose number is a multiple of num_replicas: the largest
        split in two until it is (or the last ones dropped, drop_last)."""
        extra = len(starts) % self.num_replicas
        if extra == 0:
            return starts, ends
        if self.drop_last:
            return starts[:len(starts) - extra], ends[:len(ends) - extra]
        need = self.num_replicas - extra
        while need:
            counts = ends - starts
            splittable = np.flatnonzero(counts >= 2)
            if not len(splittable):
                break  # fewer samples than ranks: some ranks get fewer batches
            chosen = splittable[np.argsort(-counts[splittable], kind="stable")][:need]
            middles = starts[chosen] + counts[chosen] // 2
            # The second halves go right after their first halves.
            at = np.sort(chosen)
            middles = middles[np.argsort(chosen)]
            starts = np.insert(starts, at + 1, middles)
            ends = np.insert(ends, at, middles)
            need -= len(chosen)
        return starts, ends

    def _mine(self):
        order, starts, ends = self.epoch_batches()
        return order, starts[self.rank::self.num_replicas], ends[self.rank::self.num_replicas]

    def __iter__(self):
        order, starts, ends = self._mine()
        skip, self._skip = self._skip, 0
        self._yielded = skip
        for start, end in zip(starts[skip:].tolist(), ends[skip:].tolist()):
            self._yielded += 1
            yield order[start:end].tolist()

    def __len__(self):
        return len(self._mine()[1])

    def state_dict(self):
        """Where this rank is: the epoch and the batches of it yielded."""
        return {"seed": self.seed, "epoch": self.epoch, "yielded": self._yielded}

    def load_state_dict(self, state):
        """The next iteration continues the epoch of ``state`` after the
        batches it had yielded (ValueError for another seed)."""
        if not isinstance(state, dict) or not {"seed", "epoch", "yielded"} <= set(state):
            raise TypeError("state must be what state_dict() returned")
        if state["seed"] != self.seed:
            raise ValueError(f"state is of seed {state['seed']}; this sampler's is {self.seed}")
        yielded = state["yielded"]
        if isinstance(yielded, bool) or not isinstance(yielded, numbers.Integral) or yielded < 0:
            raise ValueError(f"state's yielded must be a count of batches; got {yielded!r}")
        self.epoch, self._skip, self._yielded = operator.index(state["epoch"]), int(yielded), int(yielded)


def _positive_int(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what} must be an int; got {value!r}")
    if value < 1:
        raise ValueError(f"{what} must be at least 1, got {value}")
    return int(value)
