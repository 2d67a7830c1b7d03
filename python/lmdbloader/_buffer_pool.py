"""The thread loader's batch buffers (_thread_loader.py): a bounded pool of
buffers, each taken back once the tensors of the batch made in it are gone,
and the builder through which a deferred batch (batches.py's RecordBatch
and DecodedBatch) fills its tensors there, as it fills a ring slot in a
worker process. A buffer's pages stay mapped between batches: a batch
written into a reused buffer takes no page faults and no zero fill.
"""

import collections
import math
import os
import threading
import weakref

import numpy as np
import torch
from torch.utils.data._utils.collate import collate as _collate
from torch.utils.data._utils.collate import collate_tensor_fn, default_collate_fn_map

from ._ring_worker import DeferredBatch

_ALIGN = 64
_MIN_BUFFER = 64 << 10


class BufferPool:
    """Batch buffers reused once the batch's tensors are gone: at most
    ``most`` buffers kept (W x (prefetch_factor + 1)); a batch that finds
    none free and big enough takes a new one while there is room, else
    replaces a free one too small, else (every buffer held: batches kept)
    takes a fresh one the pool does not keep. Never blocks."""

    def __init__(self, most):
        self.most = max(1, most)
        self.lock = threading.Lock()
        self.free = []
        self.kept = 0
        self.kept_bytes = 0
        self.counts = collections.Counter()
        _pools.add(self)

    def lease(self, need):
        """(a numpy uint8 array of at least `need` bytes from offset, the
        offset: 64-byte aligned). The buffer returns to the pool when the
        array and everything made over it are gone."""
        with self.lock:
            self.counts["batches"] += 1
            # By place, never by value: == compares arrays element by element.
            fits = [k for k, b in enumerate(self.free) if b.nbytes - _ALIGN >= need]
            if fits:
                buffer = self.free.pop(min(fits, key=lambda k: self.free[k].nbytes))
                self.counts["reused"] += 1
                keep = True
            else:
                keep = self.kept < self.most or bool(self.free)
                if keep and self.kept >= self.most:  # room only by dropping a free buffer too small
                    small = self.free.pop(min(range(len(self.free)), key=lambda k: self.free[k].nbytes))
                    self.kept -= 1
                    self.kept_bytes -= small.nbytes
                self.counts["new" if keep else "fresh"] += 1
                size = _buffer_size(need)
                if keep:
                    self.kept += 1
                    self.kept_bytes += size
                buffer = None
        if buffer is None:
            buffer = np.empty(size, dtype=np.uint8)
        view = buffer[:]
        if keep:
            weakref.finalize(view, _give_back, weakref.ref(self), buffer)
        return view, (-buffer.ctypes.data) % _ALIGN

    def give_back(self, buffer):
        with self.lock:
            self.free.append(buffer)

    def stats(self):
        """batches, those in a reused buffer, in a new one, in a fresh one
        the pool did not keep (every buffer held); buffers kept, held now
        and their bytes."""
        with self.lock:
            return {"batches": self.counts["batches"], "reused": self.counts["reused"], "new": self.counts["new"],
                    "fresh": self.counts["fresh"], "buffers": self.kept, "most_buffers": self.most,
                    "held": self.kept - len(self.free), "buffer_bytes": self.kept_bytes}


def _give_back(pool_ref, buffer):
    pool = pool_ref()
    if pool is not None:
        pool.give_back(buffer)


def _buffer_size(need):
    want = need + need // 8 + _ALIGN
    return max(_MIN_BUFFER, (want + _MIN_BUFFER - 1) // _MIN_BUFFER * _MIN_BUFFER)


def _aligned(n):
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


class _PoolBuilder:
    """What a deferred batch (batches.py's RecordBatch, DecodedBatch) fills
    its tensors through, as it fills a ring slot: here tensors over a
    pooled buffer."""

    fn_map = default_collate_fn_map

    def __init__(self, pool):
        self.pool = pool

    def put_all(self, outputs, fill, made=None, default=None):
        sizes = [math.prod(shape) * dtype.itemsize for dtype, shape in outputs]
        if not all(sizes):
            out = [torch.empty(shape, dtype=dtype) for dtype, shape in outputs]
            fill(out)
            return out
        buffer, at = self.pool.lease(sum(_aligned(n) for n in sizes))
        dsts = []
        for (dtype, shape), nbytes in zip(outputs, sizes):
            dsts.append(torch.frombuffer(buffer, dtype=dtype, count=math.prod(shape), offset=at).view(shape))
            at += _aligned(nbytes)
        fill(dsts)
        return dsts

    def records(self, reader, indices, fallback):
        sizes = reader.value_sizes(indices)
        if not sizes or not sum(sizes):
            return fallback()
        same = len(set(sizes)) == 1
        offsets, total = [], 0
        for s in sizes:
            offsets.append(total)
            total += s if same else _aligned(s)
        buffer, at = self.pool.lease(total)
        reader.read_into(indices, buffer, [at + o for o in offsets])
        if same:
            return torch.frombuffer(buffer, dtype=torch.uint8, count=total, offset=at).view(len(sizes), sizes[0])
        return [torch.frombuffer(buffer, dtype=torch.uint8, count=s, offset=at + o) if s else
                torch.empty(0, dtype=torch.uint8) for o, s in zip(offsets, sizes)]


def pooled_collate(pool):
    """The thread loader's collate in place of lmdbloader's Collate (and of
    default_collate): a deferred batch decoded or read into a pooled
    buffer, any other batch as default_collate makes it, its tensors
    stacked into fresh ones (default_collate would put them in shared
    memory, as it does in any worker)."""
    def collate(batch):
        if isinstance(batch, DeferredBatch) and batch.pending:
            return batch.into_slot(_PoolBuilder(pool))
        return _collate(batch, collate_fn_map=_IN_PROCESS)
    return collate


def _stack(batch, *, collate_fn_map=None):
    elem = batch[0]
    if elem.is_nested or elem.layout != torch.strided:
        return collate_tensor_fn(batch, collate_fn_map=collate_fn_map)  # default_collate's errors
    return torch.stack(batch, 0)


_IN_PROCESS = {**default_collate_fn_map, torch.Tensor: _stack}


_pools = weakref.WeakSet()


def _after_fork_in_child():
    """A lock another thread held at the fork would never be released in the child."""
    for pool in list(_pools):
        pool.lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
