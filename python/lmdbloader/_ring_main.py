"""The main process's side of the batch rings (batches.py): a worker's
batch arrives as a ``Batch``, whose unpickling attaches the worker's ring
once, builds the batch's tensors over their slot under a lease, and counts
what came through the rings."""

import collections
import math
import os
import threading
import weakref

import torch

from . import _core


class Batch:
    """What a worker's collate returns: unpickled in the main process into
    the collated structure itself, its ring tensors built over their slot."""

    __slots__ = ("token", "pid", "counts", "data")

    def __init__(self, token, pid, counts, data):
        self.token, self.pid, self.counts, self.data = token, pid, counts, data

    def __reduce__(self):
        return (_delivered, (self.token, self.pid, self.counts, self.data))


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
    worker that exits normally has retired its rings: the memory of their
    free slots and of batches never received (left in the DataLoader's queue
    when its iterator shut down) went back then, a received batch's goes back
    as it is dropped. One that was killed has not, so it is done here."""
    for key, (owner, ring) in list(_attached.items()):
        if _alive(owner):
            continue
        del _attached[key]
        ring.retire()


def rebuild_tensor(key, carrier, pid, slot, generation, offset, dtype, shape):
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
            try:
                lease = _core.RingLease(entry[1], slot, generation)
            except ValueError as e:
                raise RuntimeError(f"lmdbloader.collate: a batch of worker {pid} arrived after the worker gave up "
                                   f"its ring ({e})") from None
            _leases[(key, slot, generation)] = lease
    return torch.frombuffer(lease, dtype=dtype, count=math.prod(shape), offset=offset).view(shape)


def _delivered(token, pid, counts, data):
    with _lock:
        _received.setdefault(token, {})[pid] = counts
        _delivered_counts[token] += 1
    return data


def received_stats(token):
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

