"""Argument checking shared by Reader, LmdbDataset and compat."""

import operator
import os

from . import _core

_MODES = ("auto", "pread", "mmap")
_IO_ENGINES = ("auto", "io_uring", "threads", "sync")
_CACHE_POLICIES = ("auto", "fill", "exact", "drop")
BUDGET_ENV = "LMDBLOADER_RSS_BUDGET"


def byte_size(value, what):
    """Bytes from an int or a string such as "256MiB"; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a byte size, got {value!r}")
    if not isinstance(value, str):
        try:
            value = operator.index(value)  # ints and numpy integers
        except TypeError:
            raise ValueError(f"{what} must be an int or a string like '256MiB', "
                             f"got {type(value).__name__}") from None
        if value < 0:
            raise ValueError(f"{what} must not be negative, got {value}")
        if value >= 2**64:
            raise ValueError(f"{what} must be below 2**64 bytes, got {value}")
        return value
    try:
        return _core.parse_byte_size(value.strip())
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from None


def budget_bytes(rss_budget):
    """None means: the LMDBLOADER_RSS_BUDGET environment variable, else unbounded."""
    if rss_budget is None:
        env = os.environ.get(BUDGET_ENV)
        return byte_size(env, BUDGET_ENV) if env else 0
    return byte_size(rss_budget, "rss_budget")


def check_mode(mode):
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {', '.join(_MODES)}; got {mode!r}")
    return mode


def check_io_engine(io_engine):
    if io_engine not in _IO_ENGINES:
        raise ValueError(f"io_engine must be one of {', '.join(_IO_ENGINES)}; got {io_engine!r}")
    return io_engine


def check_cache(cache):
    if cache not in _CACHE_POLICIES:
        raise ValueError(f"cache must be one of {', '.join(_CACHE_POLICIES)}; got {cache!r}")
    return cache


def check_queue_depth(queue_depth):
    if isinstance(queue_depth, bool):
        raise TypeError("queue_depth must be an int")
    try:
        depth = operator.index(queue_depth)
    except TypeError:
        raise TypeError(f"queue_depth must be an int, got {type(queue_depth).__name__}") from None
    if not 1 <= depth <= 4096:
        raise ValueError(f"queue_depth must be between 1 and 4096, got {depth}")
    return depth


def check_verify(verify_checksums):
    """True, False or "once"; another string is a mistake, not a truth value
    ("false" would otherwise read as True)."""
    if isinstance(verify_checksums, str):
        if verify_checksums != "once":
            raise ValueError(f'verify_checksums must be True, False or "once"; got {verify_checksums!r}')
        return verify_checksums
    return bool(verify_checksums)
