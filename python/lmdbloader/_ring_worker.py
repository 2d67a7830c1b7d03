"""A DataLoader worker's side of the batch rings (batches.py): its rings of
slots, and the builder that lays a batch's tensors out in a slot, or sends
them the default way when no slot can hold them."""

import math
import os
import secrets

import torch
from torch.utils.data._utils.collate import collate as _collate
from torch.utils.data._utils.collate import collate_tensor_fn, default_collate_fn_map

from . import _core

from ._ring_main import Batch, rebuild_tensor


class DeferredBatch:
    """What a batch whose records are not read yet is (batches.py's
    RecordBatch and DecodedBatch): ``pending`` until read, and
    ``into_slot(builder)`` reads or decodes it into a ring slot. A batch
    of any other type is collated as given, whatever attributes it has."""

    __slots__ = ()

_ALIGN = 64          # every tensor in a slot starts on a cache line
_MIN_SLOT = 64 << 10


def _aligned(n):
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


class _Segment:
    """One BatchRing of a worker, and whether its descriptor was sent."""

    def __init__(self, ring):
        self.ring = ring
        self.key = secrets.token_hex(8)
        self.sent = False

    def carrier(self):
        """The ring's descriptor for the first batch pickled with this ring
        (batches of a worker are unpickled in the order they are pickled),
        None for later ones. Made when pickled, not when a batch is built:
        a batch that fails before it is sent takes nothing with it."""
        if self.sent:
            return None
        from multiprocessing.reduction import DupFd
        self.sent = True
        return DupFd(self.ring.fd)


class _WorkerRings:
    """A worker's rings for one Collate configuration."""

    def __init__(self, config, info):
        self.config = config
        self.pid = os.getpid()
        # Per worker, not per loader: the DataLoader keeps at most
        # prefetch_factor batches dispatched to one worker (round robin), and
        # the consumer holds its batch, and the previous one while it asks
        # for the next (with one worker both are this worker's).
        self.slots = min(config.slots or config.prefetch_factor + 2, _core.BatchRing.MAX_SLOTS)
        self.needed = 0  # the largest batch that did not fit its slot: later slots are at least this big
        self.segments = []
        self.span = 0  # address space of the rings, what max_ring_bytes caps
        self.cap = config.max_ring_bytes
        self.counts = {"batches": 0, "in_ring": 0, "fallback_full": 0, "fallback_oversize": 0,
                       "ring_bytes": 0, "rings": 0}
        _retire_rings_at_exit()

    def new_segment(self, slot_bytes):
        try:
            ring = _core.BatchRing.create(self.slots, slot_bytes, self.config.backing)
        except OSError as e:
            raise OSError(e.errno, f"lmdbloader.collate: {e}") from None
        seg = _Segment(ring)
        self.segments.append(seg)
        self.span += ring.total_bytes
        self.counts["rings"] += 1
        if self.cap is None:
            self.cap = 2 * ring.total_bytes
        return seg

    def first_segment(self, batch_bytes):
        """The ring, sized from the worker's first batch (address space only:
        its slots take memory as batches fill them)."""
        self.new_segment(self.config.slot_bytes or _slot_size(batch_bytes))

    def acquire(self, need, reserved=None):
        """(segment, slot, generation) of a free slot of at least `need` bytes,
        its first `reserved` bytes (default `need`) backed by memory, or None
        when every slot is held and the rings may not grow. OSError when the
        memory cannot be reserved."""
        got = None
        for seg in sorted(self.segments, key=lambda s: s.ring.slot_bytes):
            if seg.ring.slot_bytes >= need:
                taken = seg.ring.acquire()
                if taken is not None:
                    got = seg, taken[0], taken[1]
                    break
        if got is None:
            # Every slot big enough is held (batches kept), or none is big enough: grow within the cap.
            slot_bytes = max([s.ring.slot_bytes for s in self.segments] + [_slot_size(need)])
            if self.span + _core.BatchRing.bytes_for(self.slots, slot_bytes) > self.cap:
                return None
            seg = self.new_segment(slot_bytes)
            taken = seg.ring.acquire()
            got = seg, taken[0], taken[1]
        try:
            _reserve(got[0], got[1], need if reserved is None else reserved)
        except BaseException:
            got[0].ring.release(got[1], got[2])
            raise
        self.trim(got[0])
        return got

    def trim(self, using):
        """Gives back the memory of free slots this worker no longer needs:
        those of rings grown for kept batches, once none of theirs is held
        and a batch found a slot elsewhere, and those too small for the
        batches now made."""
        for seg in self.segments:
            if seg is using or seg.ring.reserved_bytes <= _core.BatchRing.HEADER_BYTES:
                continue
            if seg.ring.slot_bytes < self.needed or (seg is not self.segments[0] and seg.ring.held() == 0):
                seg.ring.return_free_slots()

    def retire(self):
        for seg in self.segments:
            seg.ring.retire()

    def collate(self, batch):
        self.counts["batches"] += 1
        builder = _BatchBuilder(self)
        try:
            if isinstance(batch, DeferredBatch) and batch.pending:  # not read yet
                data = batch.into_slot(builder)
                builder.place_pending()
            else:
                data = _collate(batch, collate_fn_map=builder.fn_map)
                builder.place_pending()
        except BaseException:
            builder.abandon()
            raise
        if builder.slot is not None and not builder.fell_back:
            self.counts["in_ring"] += 1
        if builder.fell_back == "full":
            self.counts["fallback_full"] += 1
        elif builder.fell_back == "oversize":
            self.counts["fallback_oversize"] += 1
        self.counts["ring_bytes"] = sum(seg.ring.reserved_bytes for seg in self.segments)
        return Batch(self.config.token, self.pid, dict(self.counts), data)


_rings_of_this_process = {}
_retiring_in = None  # the process whose exit retires its rings


def worker_rings(config, info):
    rings = _rings_of_this_process.get(config.token)
    if rings is None or rings.pid != os.getpid():
        rings = _rings_of_this_process[config.token] = _WorkerRings(config, info)
    return rings


def _retire_rings_at_exit():
    """When this worker exits, its rings give back the memory of their free
    slots and of the batches the main process never received (those left in
    the DataLoader's queue when it shut its workers down, as it does at the
    end of an epoch, cut short or not, and when the loader goes), and have
    the main process give back each received batch's when it is dropped: an
    epoch's rings do not outlive its batches. A worker exits only once the
    main process reads nothing more of it (torch's _shutdown_workers stops
    its pin-memory thread first; an exhausted IterableDataset worker is told
    to exit after its last batch was read). A DataLoader worker leaves
    through multiprocessing, which runs these finalizers on the way out (not
    atexit: it ends with os._exit). A worker killed before it can is retired
    by the main process when it next receives a ring."""
    global _retiring_in
    if _retiring_in == os.getpid():
        return
    _retiring_in = os.getpid()
    from multiprocessing import util
    util.Finalize(None, _retire_rings, exitpriority=0)


def _retire_rings():
    for rings in _rings_of_this_process.values():
        if rings.pid == os.getpid():
            rings.retire()


def _reserve(segment, slot, nbytes):
    """Backs the first `nbytes` of `slot` with memory before they are written:
    memory the backing cannot hold is an OSError here, at this batch, never a
    SIGBUS when a page is first written."""
    try:
        segment.ring.reserve(slot, nbytes)
    except OSError as e:
        raise OSError(e.errno, f"lmdbloader.collate: {e}; fewer workers, a lower prefetch_factor or smaller "
                               "batches need less (lmdbloader.Collate)") from None


def _slot_size(total):
    return max(_MIN_SLOT, (total + total // 4 + _MIN_SLOT - 1) // _MIN_SLOT * _MIN_SLOT)


class _RingTensor:
    """A tensor of a batch in a ring slot, as it crosses to the main process.

    Before the worker's first ring exists it holds the stacked tensor itself
    (``pending``), placed into the new ring once the batch's size is known.
    """

    __slots__ = ("segment", "slot", "generation", "offset", "dtype", "shape", "pending")

    def __init__(self, dtype, shape, pending=None):
        self.dtype, self.shape, self.pending = dtype, tuple(shape), pending
        self.segment = self.slot = self.generation = self.offset = None

    def locate(self, builder, offset):
        """Placed in `builder`'s slot at `offset`."""
        self.segment, self.slot, self.generation, self.offset = builder.segment, builder.slot, builder.generation, offset
        self.pending = None
        return self

    def __reduce__(self):
        if self.segment is None:  # never placed: torch's own path
            return (_same, (self.pending,))
        return (rebuild_tensor, (self.segment.key, self.segment.carrier(), os.getpid(), self.slot,
                                  self.generation, self.offset, self.dtype, self.shape))


def _same(x):
    return x


class _BatchBuilder:
    """Places one batch's tensors into one slot, in the order collate makes them.

    What a batch that fills its own tensors uses (``into_slot`` of
    :class:`RecordBatch` and :class:`DecodedBatch`): :meth:`put` and
    :meth:`records`."""

    def __init__(self, rings):
        self.rings = rings
        self.segment = self.slot = self.generation = None
        self.used = 0
        self.pending = []
        self.fell_back = None

    @property
    def fn_map(self):
        """default_collate's map with every tensor it makes placed in the slot
        (made only for samples that go through collate, not for RecordBatch)."""
        fn_map = dict(default_collate_fn_map)
        fn_map[torch.Tensor] = self._tensor
        for kind, fn in list(fn_map.items()):  # numbers, numpy scalars: small tensors, into the slot too
            if kind is not torch.Tensor and fn is not default_collate_fn_map.get(str) and \
                    fn is not default_collate_fn_map.get(bytes):
                fn_map[kind] = self._wrap(fn)
        return fn_map

    def _wrap(self, fn):
        def small(batch, *, collate_fn_map=None):
            out = fn(batch, collate_fn_map=collate_fn_map)
            if isinstance(out, torch.Tensor) and out.layout == torch.strided and out.device.type == "cpu":
                return self.put(out.dtype, out.shape, lambda dst: dst.copy_(out), out)
            return out
        return small

    def _tensor(self, batch, *, collate_fn_map=None):
        elem = batch[0]
        if elem.is_nested or elem.layout != torch.strided or elem.device.type != "cpu":
            return collate_tensor_fn(batch, collate_fn_map=collate_fn_map)  # default's answer, errors included
        shape = (len(batch), *elem.shape)
        return self.put(elem.dtype, shape, lambda dst: torch.stack(batch, 0, out=dst),
                        None, default=lambda: collate_tensor_fn(batch, collate_fn_map=collate_fn_map))

    def put(self, dtype, shape, fill, made, default=None):
        """One tensor of `dtype` and `shape` of the batch: put_all of one."""
        return self.put_all([(dtype, shape)], lambda dsts: fill(dsts[0]), None if made is None else [made],
                            default=None if default is None else lambda: [default()])[0]

    def put_all(self, outputs, fill, made=None, default=None):
        """Tensors of the batch, one per (dtype, shape) of `outputs`, laid
        out one after another in the slot: `fill(dsts)` writes them all at
        once into `dsts`, tensors over the slot's next bytes, and their
        _RingTensors are returned (a list). Before the worker's first ring,
        `made` (or fresh tensors filled by `fill`) are kept pending until the
        ring is sized; without room in the slot, `made` or else `default()`
        (a list) is returned: the tensors take torch's own path."""
        sizes = [math.prod(shape) * dtype.itemsize for dtype, shape in outputs]
        total = sum(_aligned(n) for n in sizes)

        def fresh():
            out = made if made is not None else [torch.empty(shape, dtype=dtype) for dtype, shape in outputs]
            if made is None:
                fill(out)
            return out
        if not all(sizes):
            return fresh()
        if not self.rings.segments:
            out = fresh()
            placeholders = [_RingTensor(t.dtype, t.shape, pending=t) for t in out]
            self.pending.extend(placeholders)
            return placeholders
        if self.slot is None and self.fell_back is None:
            self._take(total)
        if self.slot is not None and self.used + total <= self.segment.ring.slot_bytes:
            _reserve(self.segment, self.slot, self.used + total)
            start = self.segment.ring.slot_offset(self.slot) + self.used
            dsts, offsets, at = [], [], 0
            for (dtype, shape), nbytes in zip(outputs, sizes):
                dsts.append(torch.frombuffer(self.segment.ring, dtype=dtype, count=math.prod(shape),
                                             offset=start + at).view(shape))
                offsets.append(self.used + at)
                at += _aligned(nbytes)
            fill(dsts)
            placed = [_RingTensor(dtype, shape).locate(self, o) for (dtype, shape), o in zip(outputs, offsets)]
            self.used += total
            return placed
        if self.slot is not None:
            self.fell_back = "oversize"
            self.rings.needed = max(self.rings.needed, self.used + total)
        return made if made is not None else default()

    def _take(self, need):
        got = self.rings.acquire(max(need, self.rings.needed), reserved=need)
        if got is None:
            self.fell_back = "full"
            return
        self.segment, self.slot, self.generation = got

    def _slot_tensor(self, dtype, numel, shape):
        """A tensor over the slot's next bytes, reserved first."""
        _reserve(self.segment, self.slot, self.used + numel * dtype.itemsize)
        start = self.segment.ring.slot_offset(self.slot) + self.used
        return torch.frombuffer(self.segment.ring, dtype=dtype, count=numel, offset=start).view(shape)

    def _placed(self, dtype, shape, nbytes):
        ph = _RingTensor(dtype, shape).locate(self, self.used)
        self.used += _aligned(nbytes)
        return ph

    def place_pending(self):
        """The worker's first batch: size the ring from it, then copy it in."""
        if not self.pending:
            return
        total = sum(_aligned(p.pending.nbytes) for p in self.pending)
        self.rings.first_segment(total)
        self._take(total)
        for ph in self.pending:
            if self.slot is None or self.used + ph.pending.nbytes > self.segment.ring.slot_bytes:
                self.fell_back = self.fell_back or "oversize"
                continue  # stays pending: torch's own path
            dst = self._slot_tensor(ph.dtype, ph.pending.numel(), ph.shape)
            dst.copy_(ph.pending)
            ph.locate(self, self.used)
            self.used += _aligned(dst.nbytes)

    def records(self, reader, indices, fallback):
        """The records at `indices` of `reader` read straight into the slot:
        [B, L] when the records have one length, else a list of 1-D views
        into the slot; `fallback()` when no slot can take them."""
        sizes = reader.value_sizes(indices)
        same = len(set(sizes)) <= 1
        offsets, total = [], 0
        for s in sizes:
            offsets.append(total)
            total += s if same else _aligned(s)
        if not self.rings.segments and total:
            self.rings.first_segment(total)
        if total:
            self._take(total)  # a slot it gives holds `total` (the ring grows for it)
        if self.slot is None:
            return fallback()
        base = self.segment.ring.slot_offset(self.slot)
        reader.read_into(indices, self.segment.ring, [base + o for o in offsets])
        if same:
            return self._placed(torch.uint8, (len(sizes), sizes[0] if sizes else 0), total)
        out = [_RingTensor(torch.uint8, (s,)).locate(self, o) for o, s in zip(offsets, sizes)]
        self.used = total
        return out

    def abandon(self):
        if self.slot is not None:
            self.segment.ring.release(self.slot, self.generation)
            self.slot = None


