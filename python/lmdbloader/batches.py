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
it has had in flight at once. When a worker exits (the end of an epoch without
persistent workers, run out or cut short by ``break``; the loader deleted),
its ring's free slots give their memory back at once, so do those of batches
it made that the main process never received (prefetched batches a ``break``
leaves in the DataLoader's queue), and each received one when its batch is
dropped.

The output equals ``default_collate``'s: same structure, types, dtypes, shapes
and values. Outside a worker (``num_workers=0``) this is ``default_collate``.
"""

import collections.abc
import inspect
import os
import secrets
import typing

import torch
import torch.utils.data
from torch.utils.data._utils.collate import collate as _collate
from torch.utils.data._utils.collate import default_collate

from . import _core
from ._options import byte_size
from ._ring_main import received_stats
from ._ring_worker import DeferredBatch, worker_rings
from ._thread_loader import ThreadLoading


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
        if not isinstance(backing, str):
            raise ValueError(f"backing must be a str, got {backing!r}")
        _core.BatchRing.check_backing(backing)  # the core's names: auto, memfd, shm
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
        return worker_rings(self, info).collate(batch)

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
        return received_stats(self.token)


#: The default instance: ``DataLoader(..., collate_fn=lmdbloader.collate)``.
collate = Collate()


def ring_stats():
    """Every collate's ring statistics in this process, summed (see Collate.stats)."""
    return received_stats(None)


# ------------------------------------------------------------ records, loader


class RecordBatch(DeferredBatch, collections.abc.Sequence):
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


@typing.runtime_checkable
class BatchDecoder(typing.Protocol):
    """What a :class:`DecodedBatch` needs of its decoder: met by
    :class:`lmdbloader.ImageDecode` and ClipDecode, which this module does
    not import (the two stand side by side; tests/python/test_source_layout.py)."""

    #: (dtype, shape) of each tensor of one sample, in order.
    outputs: tuple
    #: Whether a sample is a tuple of those tensors rather than the one tensor.
    sample_is_tuple: bool

    def decode_records(self, records, out=None, where=None, targets=True):
        """(images, targets) of ``records`` (bytes-like), decoded into
        ``out`` (the tensor, or the tuple of them, of the whole batch; made
        when None); the targets None where ``targets`` is false or the
        records hold none; ``where(k)`` names record k in errors."""

    def samples_of(self, images):
        """decode_records' images as one item a sample."""


class DecodedBatch(DeferredBatch, collections.abc.Sequence):
    """The samples of one batch of ``LmdbDataset(decode=ImageDecode(...))``
    under :class:`DataLoader`, not decoded yet: its :class:`Collate` decodes
    them in a worker straight into a ring slot (one C++ call for the batch,
    no tensor per sample, no collate copy). Decoded into fresh tensors on
    first use anywhere else; either way the batch equals what
    ``default_collate`` makes of the samples.

    ``decoder``: a :class:`BatchDecoder` (ImageDecode, ClipDecode) applied
    to the records at ``indices`` of ``reader``; ``targets``: one per
    record, returned instead of the records' own (``LmdbDataset(targets=)``).
    ``others``: (positions, values) for samples of several records
    (``LmdbDataset(samples=)``): the records at ``positions`` are read in
    the same call as the images, ``values(records, positions)`` makes one
    tuple per sample of them, and each sample is ``(image, *that tuple)``."""

    def __init__(self, reader, decoder, indices, targets=None, others=None):
        self._reader = reader
        self._decoder = decoder
        self._indices = list(indices)
        self._targets = None if targets is None else list(targets)
        self._others = others
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
        the image when the decoder has no target; (image, *others) with
        ``others``."""
        images, targets = self._decode()
        images = self._decoder.samples_of(images)
        if self._others is not None:
            return [(image, *rest) for image, rest in zip(images, targets)]
        return list(images) if targets is None else list(zip(images, targets))

    def _decode(self, out=None):
        """(the images, their targets: the dataset's, the records' own or
        None; with ``others``, the other records' tuples)."""
        count = len(self._indices)
        positions = self._indices if self._others is None else self._indices + self._others[0]
        records = self._reader.get_batch(positions)  # every record of the batch in one call
        where = self._reader.where
        own = self._targets is None and self._others is None  # else they stand for the records' targets
        images, targets = self._decoder.decode_records(records[:count], out=out,
                                                       where=lambda k: where(self._indices[k]), targets=own)
        if self._others is not None:
            return images, self._others[1](records[count:], self._others[0])
        return images, (targets if own else self._targets)

    def _batch(self, images, targets, collate_targets):
        """As default_collate makes it of (image, target) samples, or of
        (image, *others): a list."""
        if isinstance(images, tuple):  # one tensor a Crop: default_collate makes a list of a tuple
            images = list(images)
        if self._others is not None:
            return [images, *(collate_targets(column) for column in zip(*targets))]
        if targets is None:
            return images
        return [images, collate_targets(targets)]

    def collated(self):
        """The batch as default_collate makes it of :meth:`samples`, decoded straight into it."""
        images, targets = self._decode()
        return self._batch(images, targets, default_collate)

    def into_slot(self, builder):
        """The batch decoded straight into `builder`'s ring slot (Collate in a worker)."""
        decoder = self._decoder
        many = decoder.sample_is_tuple  # a tensor a Crop, else one
        targets = []

        def fill(dsts):
            targets.append(self._decode(out=dsts if many else dsts[0])[1])

        def fresh():
            images, got = self._decode()
            targets.append(got)
            return list(images) if many else [images]
        placed = builder.put_all([(dtype, (len(self._indices), *shape)) for dtype, shape in decoder.outputs], fill,
                                 default=fresh)
        images = tuple(placed) if many else placed[0]
        return self._batch(images, targets[-1], lambda t: _collate(t, collate_fn_map=builder.fn_map))

    def __reduce__(self):  # crossing processes undecoded: as the samples
        return (list, ([self[i] for i in range(len(self))],))


_LOADER_SIGNATURE = inspect.signature(torch.utils.data.DataLoader.__init__)
WORKER_METHODS = ("multiprocessing", "thread", "auto")

try:  # Python 3.13+: False where the interpreter runs without the GIL
    from sys import _is_gil_enabled
except ImportError:
    def _is_gil_enabled():
        return True


class DataLoader(torch.utils.data.DataLoader):
    """``torch.utils.data.DataLoader`` with ``collate_fn`` preset to a
    :class:`Collate` (sized by this loader's ``prefetch_factor``); every
    argument is the DataLoader's. Over ``LmdbDataset(path, decode="tensor")``
    a batch's records are read straight into a ring slot: a [B, L] uint8
    tensor when they have one length, else a list of 1-D uint8 tensors.

    ``worker_method``: "multiprocessing" (the default: torch's worker
    processes), "thread" (``num_workers`` threads of this process, each
    making whole batches: no interpreter and no index a worker; the same
    batches as the processes give, seeded alike) or "auto" (threads where
    every per-sample step is lmdbloader's C++ with the GIL released, as
    :meth:`LmdbDataset.decodes_without_python` says, and no
    ``worker_init_fn`` or ``multiprocessing_context`` is given, or where
    the interpreter runs without the GIL; processes otherwise). Threads
    share the dataset object (one Reader) and Python's ``random`` and
    numpy's global generators; lmdbloader's own draws and
    ``get_worker_info().rng`` are per thread. A thread loader resumes
    exactly from :meth:`state_dict`. The default stays "multiprocessing":
    a dataset or ``collate_fn`` of the caller's may keep state or draw from
    those shared generators, which threads would change without saying."""

    def __init__(self, dataset, *args, worker_method="multiprocessing", **kwargs):
        if worker_method not in WORKER_METHODS:
            raise ValueError(f"worker_method must be one of {', '.join(map(repr, WORKER_METHODS))}; "
                             f"got {worker_method!r}")
        bound = _LOADER_SIGNATURE.bind(self, dataset, *args, **kwargs)
        given = bound.arguments
        # Without automatic batching (batch_size=None and no batch_sampler)
        # torch applies collate_fn to each sample, and its default there is
        # default_convert, not a collate: keep torch's default then.
        batching = given.get("batch_size", 1) is not None or given.get("batch_sampler") is not None
        if given.get("collate_fn") is None and batching:
            given["collate_fn"] = Collate(prefetch_factor=given.get("prefetch_factor") or 2)
        self.worker_method = _method_for(worker_method, dataset, given)
        # A dataset whose batches can wait (LmdbDataset.with_deferred_batches)
        # has them read or decoded straight into a ring slot by the Collate
        # (into a pooled buffer by a thread).
        deferring = getattr(dataset, "with_deferred_batches", None)
        if batching and callable(deferring) and isinstance(given.get("collate_fn"), Collate):
            deferred = deferring()
            if deferred is not None:
                given["dataset"] = deferred
        super().__init__(*bound.args[1:], **bound.kwargs)
        self._threads = None
        if self.worker_method == "thread":
            ours = isinstance(self.collate_fn, Collate) or self.collate_fn is default_collate
            self._threads = ThreadLoading(self.num_workers, self.prefetch_factor, ours)
        _tell_share(self.dataset, given.get("batch_sampler"), self.sampler)

    def __iter__(self):
        if self._threads is None:
            return super().__iter__()
        return self._threads.iterator(self)

    def check_worker_number_rationality(self):
        if self.worker_method != "thread":  # threads: no process a worker to warn about
            super().check_worker_number_rationality()

    def ring_stats(self):
        """The collate's ring statistics in this process (Collate.stats); {} for
        another collate_fn. For a thread loader its buffer pool's: batches, those
        made in a reused buffer, a new one or one the pool did not keep (every
        buffer held), and the buffers it keeps (held now, bytes)."""
        if self._threads is not None:
            return self._threads.pool.stats()
        return self.collate_fn.stats() if isinstance(self.collate_fn, Collate) else {}

    def state_dict(self):
        """A thread loader's place in its epoch, read between batches: its
        base seed, the sampler's generator state, the batches delivered and
        each thread's generator after its last one. Loaded into a loader made
        alike (:meth:`load_state_dict`), its next iterator delivers exactly
        the batches this one would deliver next. {} between epochs."""
        if self._threads is None:
            raise RuntimeError("state_dict() resumes a thread loader (worker_method='thread'); worker processes "
                               "resume with torchdata's StatefulDataLoader(..., collate_fn=lmdbloader.collate)")
        return self._threads.state_dict()

    def load_state_dict(self, state):
        """Resumes the next iterator from :meth:`state_dict`'s state."""
        if self._threads is None:
            raise RuntimeError("load_state_dict() resumes a thread loader (worker_method='thread'); worker "
                               "processes resume with torchdata's StatefulDataLoader")
        self._threads.load_state_dict(state, self.num_workers)


def _method_for(requested, dataset, given):
    """The worker method `requested` ("auto" decided), checked against the
    loader's other arguments."""
    iterable = isinstance(dataset, torch.utils.data.IterableDataset)
    if requested == "auto":
        if iterable or given.get("multiprocessing_context") is not None:
            return "multiprocessing"
        if not _is_gil_enabled():
            return "thread"
        native = getattr(dataset, "decodes_without_python", None)
        if (given.get("worker_init_fn") is None and isinstance(given.get("collate_fn"), Collate)
                and callable(native) and native()):
            return "thread"
        return "multiprocessing"
    if requested == "thread":
        if iterable:
            raise ValueError("worker_method='thread' reads a map-style dataset; an IterableDataset runs with "
                             "worker_method='multiprocessing'")
        if given.get("multiprocessing_context") is not None:
            raise ValueError("multiprocessing_context starts worker processes; worker_method='thread' starts none")
        if given.get("in_order") is False:
            raise ValueError("worker_method='thread' delivers batches in order; in_order=False is not supported")
    return requested


def _tell_share(dataset, batch_sampler, sampler):
    """Tells the dataset's reader what share of its records an epoch reads
    (Reader.expect_share: on a network file system, half or more, or reads
    in chunks, fill whole chunks): the sampler's length over the dataset's,
    times the ranks on this node (LOCAL_WORLD_SIZE, as torchrun sets it) for
    a DistributedSampler, whose ranks share the node's page cache."""
    expect = getattr(dataset, "expect_share", None)
    if not callable(expect):
        return
    from .sampler import LocalitySampler
    if batch_sampler is not None:
        sampler = getattr(batch_sampler, "sampler", None)
    if isinstance(sampler, LocalitySampler):
        expect(1.0, in_chunks=True)
        return
    try:
        share = len(sampler) / len(dataset)
    except (TypeError, ZeroDivisionError):
        return  # no length to go by: the reader keeps what it chose
    if isinstance(sampler, torch.utils.data.DistributedSampler):
        share *= max(1, int(os.environ.get("LOCAL_WORLD_SIZE") or 1))
    expect(min(1.0, share))
