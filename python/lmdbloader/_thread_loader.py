"""The thread loader (``DataLoader(..., worker_method="thread")``):
``num_workers`` threads of the calling process each make whole batches, the
way torch's worker processes do, with no interpreter, no torch and no index
of their own to pay for.

What a process worker gets, a thread gets too: batch i goes to worker
i mod W, at most ``prefetch_factor`` batches in flight a worker, delivered
in order; each thread's torch draws come from a generator of its own seeded
``base_seed + worker_id``, the seed torch gives worker processes, so the
batches are those of the process loader whatever the threads' timing;
``torch.utils.data.get_worker_info()`` answers inside each thread (with the
generators in its ``rng``), and ``worker_init_fn`` runs once in each. The
dataset is the caller's object, shared by the threads (one Reader, one
index). An lmdbloader batch is decoded or read by one C++ call with the
GIL released, into a buffer from a bounded pool that takes it back once the
batch's tensors are gone (:class:`BufferPool`).

The threads are daemons and share with the iterator only its work list,
never the iterator itself: dropping the iterator (``break``, ``del``, an
exception, the interpreter's exit) stops them within the batch they are
making and joins them. A fork() while they run leaves the child a fresh
lock and an iterator that says it belongs to the parent.
"""

import collections
import itertools
import os
import random
import threading
import time
import warnings
import weakref

import numpy as np
import torch
import torch.utils.data
from torch.utils.data._utils.pin_memory import pin_memory
from torch.utils.data._utils.worker import WorkerInfo, _generate_state
from torch.utils.data._utils.worker import get_worker_info as _torch_worker_info

from ._buffer_pool import BufferPool, pooled_collate
from ._draws import draw_with

try:  # torch 2.13: the generators a worker thread draws from
    from torch.utils.data._utils.worker import _RNG
except ImportError:  # pragma: no cover
    _RNG = None

_JOIN_SECONDS = 10.0
_CPUS = max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
_POLL_SECONDS = 0.5   # a waiting main thread wakes this often (signals, a thread's death)

# ------------------------------------------------------------ worker info

_thread_info = threading.local()
_answering = []


def _worker_info_in_threads():
    # Runs as torch's get_worker_info, with its module's globals: a thread
    # of the thread loader has an answer of its own, every other thread
    # torch's (None in the main process, the process's in a worker).
    info = getattr(_lmdbloader_worker_threads, "info", None)  # noqa: F821 (torch's module global, set below)
    return _worker_info if info is None else info  # noqa: F821


def answer_worker_info_in_threads():
    """Makes torch's ``get_worker_info`` (the function itself, so every name
    bound to it, however early imported) answer per thread: the thread's
    WorkerInfo in a thread of this loader, torch's answer elsewhere."""
    if _answering:
        return
    _torch_worker_info.__globals__["_lmdbloader_worker_threads"] = _thread_info
    _torch_worker_info.__code__ = _worker_info_in_threads.__code__
    _answering.append(True)


# ------------------------------------------------------------ the iterator


class _Work:
    """What an iterator shares with its threads: each worker's tasks, the
    results not yet delivered, the stop flag; one lock guards all. Each
    worker waits on a condition of its own and the main thread on another,
    so that a batch sent or made wakes only the thread that needs it (a
    condition all waited on would wake every thread, each to take the GIL
    and the lock, for every batch)."""

    def __init__(self, workers):
        self._conditions(workers)
        self.tasks = [collections.deque() for _ in range(workers)]
        self.done = {}
        self.stopping = False
        self.forked = False
        self.threads = []
        _works.add(self)

    def _conditions(self, workers):
        self.cond = threading.Lock()
        self.work_to_do = [threading.Condition(self.cond) for _ in range(workers)]
        self.made = threading.Condition(self.cond)

    def after_fork(self):
        """In a forked child: fresh locks (one a parent's thread held stays held), and no threads."""
        self._conditions(len(self.work_to_do))
        self.forked = True

    def stop(self):
        """Stops the threads within the batch each is making, and joins them
        (at most _JOIN_SECONDS in all: a call that hangs keeps its thread,
        a daemon, until it returns)."""
        if self.forked:
            return
        with self.cond:
            self.stopping = True
            for tasks in self.tasks:
                tasks.clear()
            self.done.clear()
            for c in self.work_to_do:
                c.notify()
            self.made.notify_all()
        deadline = time.monotonic() + _JOIN_SECONDS
        me = threading.current_thread()
        for t in self.threads:
            if t is not me:
                t.join(max(0.0, deadline - time.monotonic()))


def _work_in_thread(work, worker_id, info, generator, fetch, init_fn):
    _thread_info.info = info
    draw_with(generator)
    failed = None
    if init_fn is not None:
        try:
            init_fn(worker_id)
        except Exception as e:  # every batch of this worker raises it, as torch's worker would
            failed = e
    tasks = work.tasks[worker_id]
    while True:
        with work.cond:
            while not tasks and not work.stopping:
                work.work_to_do[worker_id].wait()
            if work.stopping:
                return
            seq, index = tasks.popleft()
        if failed is not None:
            result = (False, failed)
        else:
            try:
                result = (True, fetch(index))
            except BaseException as e:  # the main thread raises it at this batch
                result = (False, e)
        state = None if generator is None else generator.get_state()
        with work.cond:
            if not work.stopping:
                work.done[seq] = (result, state)
                work.made.notify()
        del result, state


def _fetcher(dataset, auto_collation, collate, pin, device):
    """fetch(index) -> the batch, as torch's map-style fetcher makes it, pinned where asked."""
    getitems = getattr(dataset, "__getitems__", None) if auto_collation else None

    def fetch(index):
        if auto_collation:
            data = getitems(index) if getitems else [dataset[i] for i in index]
        else:
            data = dataset[index]
        data = collate(data)
        return pin_memory(data, device) if pin else data
    return fetch


class ThreadLoaderIter:
    """One iteration (or, with persistent workers, every iteration) of a
    thread loader over `loader`: see the module's docstring. ``state``: a
    :meth:`state_dict` to resume from."""

    def __init__(self, loader, collate, pool, state=None):
        self.workers = loader.num_workers
        self.prefetch = (loader.prefetch_factor or 2) if self.workers else 0
        self.timeout = loader.timeout
        self.generator = loader.generator
        self.pool = pool
        pin = loader.pin_memory and torch.accelerator.is_available()
        if loader.pin_memory and not pin:
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                          "then device pinned memory won't be used.", stacklevel=3)
        device = torch.accelerator.current_accelerator().type if pin else None
        self.auto_collation = loader.batch_sampler is not None
        self.index_sampler = loader.batch_sampler if self.auto_collation else loader.sampler
        self.persistent = loader.persistent_workers and self.workers > 0
        self.fetch = _fetcher(loader.dataset, self.auto_collation, collate, pin, device)
        self.work = None
        self.closer = None
        self.worker_states = []
        self._start_epoch(loader, state, first=True)
        if self.workers:
            self._start_threads(loader, state)

    # -- epochs

    def _start_epoch(self, loader, state, first):
        self.index_sampler = loader.batch_sampler if self.auto_collation else loader.sampler
        self.sampler_iter = iter(self.index_sampler)
        if first:
            self.base_seed = (int(state["base_seed"]) if state else
                              torch.empty((), dtype=torch.int64).random_(generator=self.generator).item())
        source = self.generator
        self.sampler_rng = state["sampler_rng"] if state else (source.get_state() if source is not None
                                                               else torch.get_rng_state())
        self.yielded = int(state["yielded"]) if state else 0
        self.sent = self.rcvd = self.yielded
        self.started = False
        # The sampler draws (RandomSampler's seed, ...) at its first batch,
        # taken now, as torch's worker iterator takes it; resumed, from the
        # state the interrupted run's drew from, the batches it delivered
        # skipped (indices only), the caller's default generator left as it was.
        saved = None
        if state:
            saved = None if source is not None else torch.get_rng_state()
            (source.set_state if source is not None else torch.set_rng_state)(self.sampler_rng)
        try:
            self.ahead = list(itertools.islice(self.sampler_iter, self.yielded, self.yielded + 1))
        finally:
            if saved is not None:
                torch.set_rng_state(saved)
        self.ended = not self.ahead

    def _next_index(self):
        if self.ahead:
            return self.ahead.pop()
        return next(self.sampler_iter)

    def _start_threads(self, loader, state):
        answer_worker_info_in_threads()
        work = self.work = _Work(self.workers)
        saved = state["workers"] if state else None
        for w in range(self.workers):
            seed = self.base_seed + w
            generator = torch.Generator()
            generator.manual_seed(seed)
            if saved is not None:
                generator.set_state(saved[w])
            self.worker_states.append(generator.get_state())
            rng = None if _RNG is None else _RNG(random.Random(seed), generator,
                                                   np.random.RandomState(_generate_state(self.base_seed, w)))
            info = _worker_info(w, self.workers, seed, loader.dataset, rng)
            t = threading.Thread(target=_work_in_thread, name=f"lmdbloader_worker_{w}", daemon=True,
                                 args=(work, w, info, generator, self.fetch, loader.worker_init_fn))
            work.threads.append(t)
        for t in work.threads:
            t.start()
        self.closer = weakref.finalize(self, work.stop)
        self._fill()

    @property
    def alive(self):
        """Whether its threads run (num_workers > 0, not closed)."""
        return self.closer is not None and self.closer.alive

    def _fill(self):
        """Sends batches until ``prefetch_factor`` a worker are in flight, as
        torch keeps them; until the epoch's first batch is delivered, no more
        than there are CPUs to make them, so that the first batch does not
        share them with W - 1 others (which batch a thread makes, and so
        what it draws, does not change)."""
        limit = self.prefetch * self.workers
        if not self.started:
            limit = min(limit, _CPUS)
        while not self.ended and self.sent - self.rcvd < limit:
            self._dispatch()

    def _dispatch(self):
        if self.ended:
            return
        try:
            index = self._next_index()
        except StopIteration:
            self.ended = True
            return
        worker = self.sent % self.workers
        with self.work.cond:
            self.work.tasks[worker].append((self.sent, index))
            self.work.work_to_do[worker].notify()
        self.sent += 1

    def reset(self, loader):
        """The next epoch of persistent workers: the batches still in flight
        are made and dropped (as torch's workers make them), then the
        sampler starts again; the threads and their generators go on."""
        if not self.alive:
            raise RuntimeError("this thread loader's workers have stopped; make a new iterator")
        while self.rcvd < self.sent:
            _, state = _wait(self.work, self.rcvd, self.timeout)
            self.worker_states[self.rcvd % self.workers] = state
            self.rcvd += 1
        self._start_epoch(loader, None, first=False)
        self._fill()

    # -- delivery

    def __iter__(self):
        return self

    def __next__(self):
        if self.work is None:  # num_workers=0: the calling thread makes each batch
            if self.ended:
                raise StopIteration
            try:
                index = self._next_index()
            except StopIteration:
                self.ended = True
                raise
            batch = self.fetch(index)
            self.yielded += 1
            return batch
        if self.work.forked:
            raise RuntimeError("this thread loader's iterator was made before fork(): its threads are the "
                               "parent's; make a new iterator in the child")
        if self.rcvd == self.sent:
            self._fill()
        if self.rcvd == self.sent:
            self.ended = True
            if not self.persistent:
                self.close()
            raise StopIteration
        seq = self.rcvd
        try:
            (ok, value), state = _wait(self.work, seq, self.timeout)
        except BaseException:  # timed out, interrupted: the threads stop now
            self.close()
            raise
        self.rcvd += 1
        self.worker_states[seq % self.workers] = state
        self.started = True
        self._fill()
        self.yielded += 1
        if not ok:
            # The traceback keeps this frame: not the iterator, so that
            # dropping the iterator still stops its threads.
            del self
            raise value
        return value

    def close(self):
        """Stops and joins the threads (idempotent)."""
        if self.closer is not None:
            self.closer()

    def __len__(self):
        return len(self.index_sampler)

    def state_dict(self):
        """Where this epoch stands: enough for a fresh loader's next iterator
        to deliver exactly the batches this one would deliver next."""
        return {"base_seed": self.base_seed, "sampler_rng": self.sampler_rng, "yielded": self.yielded,
                "num_workers": self.workers,
                "workers": None if self.work is None else [s.clone() for s in self.worker_states]}


def _wait(work, seq, timeout):
    """(result, generator state) of batch `seq`, waited for at most
    `timeout` seconds (0: no limit), waking now and then for signals."""
    deadline = time.monotonic() + timeout if timeout > 0 else None
    maker = work.threads[seq % len(work.threads)]
    with work.cond:
        while seq not in work.done:
            if work.stopping:
                raise RuntimeError("this thread loader's workers have stopped")
            if not maker.is_alive():
                raise RuntimeError(f"DataLoader worker thread {seq % len(work.threads)} exited unexpectedly")
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"DataLoader timed out after {timeout} seconds")
                work.made.wait(min(left, _POLL_SECONDS))
            else:
                work.made.wait(_POLL_SECONDS)
        return work.done.pop(seq)


class ThreadLoading:
    """A thread loader's lasting parts: its buffer pool, the iterator of
    persistent workers, the latest iterator (what :meth:`state_dict`
    describes) and a state to resume from."""

    def __init__(self, workers, prefetch_factor, lmdbloader_collate):
        self.pool = BufferPool(max(workers, 1) * ((prefetch_factor or 2) + 1))
        self.collate = pooled_collate(self.pool) if lmdbloader_collate else None
        self.kept = None
        self.latest = None
        self.resume = None

    def iterator(self, loader):
        collate = self.collate or loader.collate_fn
        state, self.resume = self.resume, None
        if not (loader.persistent_workers and loader.num_workers > 0):
            it = ThreadLoaderIter(loader, collate, self.pool, state)
        elif self.kept is not None and self.kept.alive and state is None:
            it = self.kept
            it.reset(loader)
        else:
            if self.kept is not None:
                self.kept.close()
            it = self.kept = ThreadLoaderIter(loader, collate, self.pool, state)
        self.latest = weakref.ref(it)
        return it

    def state_dict(self):
        it = None if self.latest is None else self.latest()
        if it is None or (it.ended and it.rcvd == it.sent):
            return {}  # between epochs: the next starts afresh
        return it.state_dict()

    def load_state_dict(self, state, workers):
        if not isinstance(state, dict):
            raise TypeError(f"state must be what DataLoader.state_dict() returned; got {type(state).__name__}")
        if state:
            missing = [k for k in ("base_seed", "sampler_rng", "yielded", "num_workers", "workers") if k not in state]
            if missing:
                raise ValueError(f"state is not a thread loader's state_dict(): it has no {missing[0]!r}")
            if state["num_workers"] != workers:
                raise ValueError(f"state was saved with num_workers={state['num_workers']}; this loader has "
                                 f"num_workers={workers}, whose batches would differ")
        self.resume = dict(state) or None


def _worker_info(worker_id, workers, seed, dataset, rng):
    fields = getattr(WorkerInfo, "__dataclass_fields__", {})
    extra = {}
    if "rng" in fields:
        extra["rng"] = rng
    if "worker_method" in fields:
        extra["worker_method"] = "thread"
    return WorkerInfo(id=worker_id, num_workers=workers, seed=seed, dataset=dataset, **extra)


# ------------------------------------------------------------ fork

_works = weakref.WeakSet()


def _after_fork_in_child():
    """The parent's threads are not in the child, and a lock one of them
    held at the fork would never be released: fresh locks, and iterators
    that know they are the parent's."""
    for work in list(_works):
        work.after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
