"""Tensor batches from DataLoader workers through a bounded ring of reused
shared memory: :data:`collate`, :class:`Collate` and :class:`DataLoader`.

torch's ``default_collate`` stacks each batch, inside a worker, into a fresh
shared-memory segment per tensor, and the main process maps it and frees it
when the batch dies: per 8 MiB batch about 19 ms of segment setup, page
faults, zero fills, descriptor passing and page release, where refilling an
already mapped buffer costs under 1 ms. Here each worker owns a ring of
slots (``lmdbloader._core.BatchRing``: a memfd, nothing in /dev/shm), created
at its first batch and sent to the main process once; every later batch
travels as (slot, generation, layout). In the main process the batch's
tensors are built over the slot, and the slot is freed when the last tensor,
view or numpy alias of the batch is gone (a ``RingLease`` that the tensors'
storage holds), never at the next iteration: kept batches stay intact. When
every slot is held the ring grows up to a cap; past it the batch takes the
default path (counted, never blocking).

Memory: a worker's ring has a slot for each batch the DataLoader can have
waiting on that worker (``prefetch_factor``), one for the batch the consumer
holds and one for the batch it still holds while asking for the next. A slot
takes memory only when a batch first needs it, and only as much as the
largest batch it has held, so a worker's ring holds no more than the batches
it has had in flight at once. When a worker exits, its ring's free slots give
their memory back at once and each held one when its batch is dropped.

The output equals ``default_collate``'s: same structure, types, dtypes, shapes
and values. Outside a worker (``num_workers=0``) this is ``default_collate``.
"""

import collections.abc
import inspect
import math
import os
import secrets
import threading
import weakref

import torch
import torch.utils.data
from torch.utils.data._utils.collate import collate as _collate
from torch.utils.data._utils.collate import collate_tensor_fn, default_collate, default_collate_fn_map

from . import _core
from ._options import byte_size

_ALIGN = 64          # every tensor in a slot starts on a cache line
_MIN_SLOT = 64 << 10
_BACKINGS = ("auto", "memfd", "shm")


def _aligned(n):
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


class Collate:
    """A ``collate_fn`` whose tensors travel through a per-worker ring of
    reused shared-memory slots (see the module's docstring).

    ``slots``: slots a worker's ring holds (default ``prefetch_factor`` + 2:
    the batches the DataLoader can have waiting on one worker, the one the
    consumer holds and the one it holds while asking for the next; pass the
    DataLoader's ``prefetch_factor``, as :class:`DataLoader` does). A slot
    takes memory (whole pages) only when a batch first needs it, as much as
    the largest batch it has held. ``slot_bytes``: bytes a slot can hold
    (default: the worker's first batch, plus a quarter, at least 64 KiB).
    ``max_ring_bytes``: what a worker's rings may span when batches are kept
    and every slot is held, or a batch outgrows its slot (default: twice the
    first ring); past it a batch takes the default path. A worker's shared
    memory is therefore at most ``slots`` x ``slot_bytes`` while batches are
    dropped, ``max_ring_bytes`` when they are kept. ``backing``: "auto"
    (memfd, else /dev/shm), "memfd" or "shm"; memory the backing cannot
    reserve is an OSError at the batch that needs it, naming the backing and
    the size, never a SIGBUS.
    """

    def __init__(self, *, slots=None, slot_bytes=None, max_ring_bytes=None, prefetch_factor=2, backing="auto"):
        most = _core.BatchRing.MAX_SLOTS
        if slots is not None and (isinstance(slots, bool) or not isinstance(slots, int) or not 1 <= slots <= most):
            raise ValueError(f"slots must be an integer from 1 to {most}, got {slots!r}")
        if isinstance(prefetch_factor, bool) or not isinstance(prefetch_factor, int) or prefetch_factor < 1:
            raise ValueError(f"prefetch_factor must be a positive integer, got {prefetch_factor!r}")
        if backing not in _BACKINGS:
            raise ValueError(f"backing must be one of {', '.join(_BACKINGS)}; got {backing!r}")
        self.slots = slots
        self.slot_bytes = None if slot_bytes is None else byte_size(slot_bytes, "slot_bytes")
        if self.slot_bytes == 0:
            raise ValueError("slot_bytes must be positive")
        self.max_ring_bytes = None if max_ring_bytes is None else byte_size(max_ring_bytes, "max_ring_bytes")
        self.prefetch_factor = prefetch_factor
        self.backing = backing
        self._token = secrets.token_hex(8)

    def __call__(self, batch):
        info = torch.utils.data.get_worker_info()
        if info is None:
            if isinstance(batch, (RecordBatch, DecodedBatch)):
                return batch.collated()
            return default_collate(batch)
        return _worker_rings(self, info).collate(batch)

    def __repr__(self):
        return (f"lmdbloader.Collate(slots={self.slots}, slot_bytes={self.slot_bytes}, "
                f"max_ring_bytes={self.max_ring_bytes}, prefetch_factor={self.prefetch_factor}, "
                f"backing={self.backing!r})")

    @property
    def token(self):
        """Names this configuration's rings, in every process."""
        return self._token

    def stats(self):
        """What this process received through this collate's rings: batches,
        those whose tensors all came through a ring, fallbacks (ring full, or
        a batch larger than its slot), and each worker's own counts and ring
        bytes (the shared memory it holds, counted once in PSS)."""
        return _received_stats(self.token)


#: The default instance: ``DataLoader(..., collate_fn=lmdbloader.collate)``.
collate = Collate()


def ring_stats():
    """Every collate's ring statistics in this process, summed (see Collate.stats)."""
    return _received_stats(None)


# ---------------------------------------------------------------- in a worker


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
            if isinstance(batch, (RecordBatch, DecodedBatch)) and batch.pending:
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
        return _Batch(self.config.token, self.pid, dict(self.counts), data)


_rings_of_this_process = {}
_retiring_in = None  # the process whose exit retires its rings


def _worker_rings(config, info):
    rings = _rings_of_this_process.get(config.token)
    if rings is None or rings.pid != os.getpid():
        rings = _rings_of_this_process[config.token] = _WorkerRings(config, info)
    return rings


def _retire_rings_at_exit():
    """When this worker exits, its rings give their free slots' memory back
    and have the main process give back each held slot's when its batch is
    dropped: an epoch's rings do not outlive its batches. A DataLoader worker
    leaves through multiprocessing, which runs these finalizers on the way
    out (not atexit: it ends with os._exit). A worker killed before it can
    is retired by the main process when it next receives a ring."""
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
        return (_rebuild_tensor, (self.segment.key, self.segment.carrier(), os.getpid(), self.slot,
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
        """A tensor of `dtype` and `shape` of the batch: `fill(dst)` writes it
        into `dst`, a tensor over the slot's next bytes, and its _RingTensor
        is returned. Before the worker's first ring, `made` (or a fresh tensor
        filled by `fill`) is kept pending until the ring is sized; without
        room in the slot, `made` or else `default()` is returned: the tensor
        takes torch's own path."""
        numel = math.prod(shape)
        nbytes = numel * dtype.itemsize
        if nbytes == 0:
            out = made if made is not None else torch.empty(shape, dtype=dtype)
            if made is None:
                fill(out)
            return out
        if not self.rings.segments:
            out = made if made is not None else torch.empty(shape, dtype=dtype)
            if made is None:
                fill(out)
            ph = _RingTensor(dtype, shape, pending=out)
            self.pending.append(ph)
            return ph
        if self.slot is None and self.fell_back is None:
            self._take(nbytes)
        if self.slot is not None and self.used + nbytes <= self.segment.ring.slot_bytes:
            dst = self._slot_tensor(dtype, numel, shape)
            fill(dst)
            return self._placed(dtype, shape, nbytes)
        if self.slot is not None:
            self.fell_back = "oversize"
            self.rings.needed = max(self.rings.needed, self.used + nbytes)
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


class _Batch:
    """What a worker's collate returns: unpickled in the main process into
    the collated structure itself, its ring tensors built over their slot."""

    __slots__ = ("token", "pid", "counts", "data")

    def __init__(self, token, pid, counts, data):
        self.token, self.pid, self.counts, self.data = token, pid, counts, data

    def __reduce__(self):
        return (_delivered, (self.token, self.pid, self.counts, self.data))


# ---------------------------------------------------------- in the main process

_lock = threading.Lock()
_attached = {}  # ring key -> (creator pid, BatchRing)
_leases = weakref.WeakValueDictionary()  # (ring key, slot, generation) -> RingLease
_received = {}  # collate token -> {worker pid: latest counts}
_delivered_counts = collections.Counter()


def _forget_attached_rings():
    """In a forked child: the parent's rings are not the child's to drop or
    free (the batches it inherited keep their own rings alive), and a lock
    another thread held at the fork would never be released."""
    global _lock
    _lock = threading.Lock()
    _attached.clear()


os.register_at_fork(after_in_child=_forget_attached_rings)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _drop_rings_of_exited_workers():
    """Rings whose worker has exited, dropped when another ring arrives. A
    worker that exits normally has retired its rings (their memory goes back
    as their batches are dropped); one that was killed has not, so it is
    done here. A slot held with no batch of it in this process holds a batch
    that was never received (its pickle was left in the DataLoader's queue
    when the iterator shut down): nothing will read it, so it is freed."""
    for key, (owner, ring) in list(_attached.items()):
        if _alive(owner):
            continue
        del _attached[key]
        ring.retire()
        for slot in range(ring.slots):
            generation = ring.generation(slot)
            if generation and (key, slot, generation) not in _leases:
                ring.release(slot, generation)


def _rebuild_tensor(key, carrier, pid, slot, generation, offset, dtype, shape):
    with _lock:
        entry = _attached.get(key)
        if entry is None:
            if carrier is None:
                raise RuntimeError(f"lmdbloader.collate: a batch names a ring of worker {pid} that this process "
                                   "never received (batches of a worker must be unpickled in the order sent)")
            _drop_rings_of_exited_workers()
            entry = _attached[key] = (pid, _core.BatchRing.attach(carrier.detach()))
        lease = _leases.get((key, slot, generation))
        if lease is None:
            lease = _leases[(key, slot, generation)] = _core.RingLease(entry[1], slot, generation)
    return torch.frombuffer(lease, dtype=dtype, count=math.prod(shape), offset=offset).view(shape)


def _delivered(token, pid, counts, data):
    with _lock:
        _received.setdefault(token, {})[pid] = counts
        _delivered_counts[token] += 1
    return data


def _received_stats(token):
    with _lock:
        tokens = [token] if token is not None else list(_received)
        workers = {}
        for t in tokens:
            for pid, counts in _received.get(t, {}).items():
                workers[pid] = dict(counts)
        out = {"batches": sum(_delivered_counts[t] for t in tokens),
               "in_ring": sum(w["in_ring"] for w in workers.values()),
               "fallback_full": sum(w["fallback_full"] for w in workers.values()),
               "fallback_oversize": sum(w["fallback_oversize"] for w in workers.values()),
               "worker_ring_bytes": sum(w["ring_bytes"] for w in workers.values()),
               "attached_ring_bytes": sum(r.reserved_bytes for _, r in _attached.values()),
               "workers": workers}
    return out


# ------------------------------------------------------------ records, loader


class RecordBatch(collections.abc.Sequence):
    """The records of one batch of ``LmdbDataset(decode="tensor")`` under
    :class:`DataLoader`, not read yet: its :class:`Collate` reads them in a
    worker straight into a ring slot (one batched read, checksums checked in
    place, no bytes objects, no tensor per record). Read as 1-D uint8
    tensors on first use anywhere else."""

    def __init__(self, reader, indices):
        self._reader = reader
        self._indices = list(indices)
        self._tensors = None

    def __len__(self):
        return len(self._indices)

    def __getitem__(self, i):
        return self.tensors()[i]

    @property
    def pending(self):
        """True until the records are read (:meth:`tensors`)."""
        return self._tensors is None

    def tensors(self):
        """The records as 1-D uint8 tensors, read in one call the first time."""
        if self._tensors is None:
            sizes = self._reader.value_sizes(self._indices)
            tensors = [torch.empty(s, dtype=torch.uint8) for s in sizes]
            self._reader.read_into(self._indices, [t.numpy() for t in tensors])
            self._tensors = tensors
        return self._tensors

    def into_slot(self, builder):
        """The batch read straight into `builder`'s ring slot (Collate in a worker)."""
        return builder.records(self._reader, self._indices, self.collated)

    def collated(self):
        """[B, L] when the records have one length, else a list of 1-D views
        into one buffer; read with one call."""
        if self._tensors is not None:
            ts = self._tensors
            if len({t.numel() for t in ts}) <= 1:
                return torch.stack(ts) if ts else torch.empty((0, 0), dtype=torch.uint8)
            return list(ts)
        sizes = self._reader.value_sizes(self._indices)
        if len(set(sizes)) <= 1:
            out = torch.empty((len(sizes), sizes[0] if sizes else 0), dtype=torch.uint8)
            self._reader.read_into(self._indices, out.numpy().reshape(-1),
                                   [k * (sizes[0] if sizes else 0) for k in range(len(sizes))])
            return out
        offsets = [0]
        for s in sizes[:-1]:
            offsets.append(offsets[-1] + s)
        flat = torch.empty(sum(sizes), dtype=torch.uint8)
        self._reader.read_into(self._indices, flat.numpy(), offsets)
        return [flat[o:o + s] for o, s in zip(offsets, sizes)]

    def __reduce__(self):  # crossing processes unread: as the tensors
        return (list, (self.tensors(),))


class DecodedBatch(collections.abc.Sequence):
    """The samples of one batch of ``LmdbDataset(decode=ImageDecode(...))``
    under :class:`DataLoader`, not decoded yet: its :class:`Collate` decodes
    them in a worker straight into a ring slot (one C++ call for the batch,
    no tensor per sample, no collate copy). Decoded into fresh tensors on
    first use anywhere else; either way the batch equals what
    ``default_collate`` makes of the samples.

    ``decoder``: an :class:`lmdbloader.ImageDecode` (or ClipDecode) applied
    to the records at ``indices`` of ``reader``."""

    def __init__(self, reader, decoder, indices):
        self._reader = reader
        self._decoder = decoder
        self._indices = list(indices)
        self._samples = None

    def __len__(self):
        return len(self._indices)

    def __getitem__(self, i):
        if self._samples is None:
            self._samples = self.samples()
        return self._samples[i]

    @property
    def pending(self):
        """True until the samples are decoded (by indexing the batch)."""
        return self._samples is None

    def samples(self):
        """The batch's samples, decoded in one call: each (image, target), or
        the image when the decoder has no target."""
        images, targets = self._decode()
        return list(images) if self._decoder.target is None else list(zip(images, targets))

    def _decode(self, out=None):
        records = self._reader.get_batch(self._indices)
        where = self._reader.where
        return self._decoder.decode_records(records, out=out, where=lambda k: where(self._indices[k]))

    def _batch(self, images, targets, collate_targets):
        """As default_collate makes it of (image, target) samples: a list."""
        if self._decoder.target is None:
            return images
        return [images, collate_targets(targets)]

    def collated(self):
        """The batch as default_collate makes it of :meth:`samples`, decoded straight into it."""
        images, targets = self._decode()
        return self._batch(images, targets, default_collate)

    def into_slot(self, builder):
        """The batch decoded straight into `builder`'s ring slot (Collate in a worker)."""
        decoder = self._decoder
        targets = []

        def fill(dst):
            targets.append(self._decode(out=dst)[1])

        def fresh():
            images, got = self._decode()
            targets.append(got)
            return images
        images = builder.put(decoder.dtype, (len(self._indices), *decoder.sample_shape), fill, None, default=fresh)
        return self._batch(images, targets[-1], lambda t: _collate(t, collate_fn_map=builder.fn_map))

    def __reduce__(self):  # crossing processes undecoded: as the samples
        return (list, ([self[i] for i in range(len(self))],))


_LOADER_SIGNATURE = inspect.signature(torch.utils.data.DataLoader.__init__)


class DataLoader(torch.utils.data.DataLoader):
    """``torch.utils.data.DataLoader`` with ``collate_fn`` preset to a
    :class:`Collate` (sized by this loader's ``prefetch_factor``); every
    argument is the DataLoader's. Over ``LmdbDataset(path, decode="tensor")``
    a batch's records are read straight into a ring slot: a [B, L] uint8
    tensor when they have one length, else a list of 1-D uint8 tensors."""

    def __init__(self, dataset, *args, **kwargs):
        bound = _LOADER_SIGNATURE.bind(self, dataset, *args, **kwargs)
        given = bound.arguments
        # Without automatic batching (batch_size=None and no batch_sampler)
        # torch applies collate_fn to each sample, and its default there is
        # default_convert, not a collate: keep torch's default then.
        batching = given.get("batch_size", 1) is not None or given.get("batch_sampler") is not None
        if given.get("collate_fn") is None and batching:
            given["collate_fn"] = Collate(prefetch_factor=given.get("prefetch_factor") or 2)
        # A dataset whose batches can wait (LmdbDataset.with_deferred_batches)
        # has them read or decoded straight into a ring slot by the Collate.
        deferring = getattr(dataset, "with_deferred_batches", None)
        if batching and callable(deferring) and isinstance(given.get("collate_fn"), Collate):
            deferred = deferring()
            if deferred is not None:
                given["dataset"] = deferred
        super().__init__(*bound.args[1:], **bound.kwargs)

    def ring_stats(self):
        """The collate's ring statistics in this process (Collate.stats); {} for another collate_fn."""
        return self.collate_fn.stats() if isinstance(self.collate_fn, Collate) else {}

