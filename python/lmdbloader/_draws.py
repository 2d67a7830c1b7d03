"""Which torch generator lmdbloader's random draws take (crop boxes, flips,
colour ops, clip starts): torch's default one, as torchvision's transforms
do, except in a thread of the thread loader (``DataLoader(...,
worker_method="thread")``), which draws from a generator of its own, seeded
as torch seeds a worker process's default one: a thread draws what a
worker process would, whatever the other threads draw meanwhile."""

import threading

_thread = threading.local()


def generator():
    """The calling thread's own torch.Generator, or None: torch's default."""
    return getattr(_thread, "generator", None)


def draw_with(generator):
    """Makes the calling thread's draws take `generator` (None: torch's default)."""
    _thread.generator = generator
