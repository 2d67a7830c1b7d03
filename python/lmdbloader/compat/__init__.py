"""The read-only part of py-lmdb's API, on top of lmdbloader.Reader.

Existing dataset code switches by changing its import::

    import lmdbloader.compat as lmdb
    env = lmdb.open(path, readonly=True, lock=False, readahead=False, meminit=False)
    with env.begin(write=False) as txn:
        value = txn.get(key)

and then reads under a memory budget: the ``rss_budget`` keyword of
:func:`open` or the LMDBLOADER_RSS_BUDGET environment variable.

What py-lmdb does on a read-only environment, this does, checked by
differential tests against py-lmdb itself (tests/python/test_compat_differential.py):
values, cursor positioning (including MDB_DUPSORT databases and the positions
LMDB's cursor keeps after a failed move), ``stat``/``info``/``flags``, errors
(every one an :class:`Error` subclass named as in py-lmdb, with its message
shape), argument checks, and errors after ``close()``, ``commit()`` and
``abort()``. Every write request raises :class:`ReadonlyError`, as py-lmdb
does for an environment opened with ``readonly=True``. Keywords that only tune
LMDB itself (``readahead``, ``meminit``, ``map_size``, ...) are accepted and
reported by ``flags()``/``info()``; unknown keywords raise ``TypeError``.
Opening writes nothing into the dataset's directory (docs/NOTES.md, "Caveats", the record index).
"""

# py-lmdb's module has these names too: code may reach them through it.
import os  # noqa: F401
import sys  # noqa: F401

from ..errors import CorruptedError, Error, ReadonlyError
from .cursor import Cursor  # noqa: F401
from .environment import Environment, enable_drop_gil, open, version  # noqa: F401
from .errors import (
    BadChecksumError,
    BadDbiError,
    BadRslotError,
    BadTxnError,
    BadValsizeError,
    CryptoFailError,
    CursorFullError,
    DbsFullError,
    DiskError,
    EnvEncryptionError,
    IncompatibleError,
    InvalidError,
    InvalidParameterError,
    KeyExistsError,
    LockError,
    MapFullError,
    MapResizedError,
    MemoryError,
    NotFoundError,
    PageFullError,
    PageNotFoundError,
    PanicError,
    ProblemError,
    ReadersFullError,
    TlsFullError,  # noqa: F401
    TxnFullError,
    VersionMismatchError,
)
from .transaction import Transaction  # noqa: F401

__all__ = ["open", "version", "Environment", "Transaction", "Cursor", "Error", "ReadonlyError",
           "NotFoundError", "InvalidError", "BadValsizeError", "MapFullError", "CorruptedError",
           "IncompatibleError", "InvalidParameterError", "DbsFullError"]
