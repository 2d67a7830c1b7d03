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
Opening writes nothing into the dataset's directory (README, "The record index").
"""

import bisect
import operator
import os
import re
import threading
import sys

from . import _core
from .errors import CorruptedError, Error, ReadonlyError, UnsupportedError
from .reader import Reader

__all__ = ["open", "version", "Environment", "Transaction", "Cursor", "Error", "ReadonlyError",
           "NotFoundError", "InvalidError", "BadValsizeError", "MapFullError", "CorruptedError",
           "IncompatibleError", "InvalidParameterError", "DbsFullError"]


# py-lmdb's exception classes (all lmdb.Error subclasses), by name.
class KeyExistsError(Error):
    """Key/data pair already exists."""


class NotFoundError(Error):
    """No matching key/data pair found."""


class PageNotFoundError(Error):
    """Request page not found."""


class PanicError(Error):
    """Update of meta page failed."""


class VersionMismatchError(Error):
    """Database environment version mismatch."""


class InvalidError(Error):
    """File is not an MDB file."""


class MapFullError(Error):
    """Environment map_size= limit reached."""


class DbsFullError(Error):
    """Environment max_dbs= limit reached."""


class ReadersFullError(Error):
    """Environment max_readers= limit reached."""


class TlsFullError(Error):
    """Thread-local storage keys full - too many environments open."""


class TxnFullError(Error):
    """Transaction has too many dirty pages - transaction too big."""


class CursorFullError(Error):
    """Internal error - cursor stack limit reached."""


class PageFullError(Error):
    """Internal error - page has no more space."""


class MapResizedError(Error):
    """Database contents grew beyond environment map_size=."""


class IncompatibleError(Error):
    """Operation and DB incompatible, or DB flags changed."""


class BadRslotError(Error):
    """Invalid reuse of reader locktable slot."""


class BadDbiError(Error):
    """The specified DBI was changed unexpectedly."""


class BadTxnError(Error):
    """Transaction cannot recover - it must be aborted."""


class BadValsizeError(Error):
    """Too big key/data, key is empty, or wrong DUPFIXED size."""


class InvalidParameterError(Error):
    """An invalid parameter was specified."""


class LockError(Error):
    """The environment was locked by another process."""


class MemoryError(Error):  # noqa: A001 - py-lmdb's name
    """Out of memory."""


class DiskError(Error):
    """No more disk space."""


# LMDB 1.0's error codes (py-lmdb 3 names them; liblmdb 0.9 never returns them).
class ProblemError(Error):
    """Unexpected problem - transaction should abort."""


class BadChecksumError(Error):
    """Page checksum incorrect."""


class CryptoFailError(Error):
    """Encryption/decryption failed."""


class EnvEncryptionError(Error):
    """Environment encryption mismatch."""


_CLOSED = "Attempt to operate on closed/deleted/dropped object."
_BAD_VALSIZE = "MDB_BAD_VALSIZE: Unsupported size of key/DB name/data, or wrong DUPFIXED size"
_NOTFOUND = "MDB_NOTFOUND: No matching key/data pair found"
_INCOMPATIBLE = "MDB_INCOMPATIBLE: Operation and DB incompatible, or DB flags changed"
_MAX_KEY = 511

# lmdb.h's database flags.
_REVERSEKEY, _DUPSORT, _INTEGERKEY, _DUPFIXED, _INTEGERDUP, _REVERSEDUP = 0x02, 0x04, 0x08, 0x10, 0x20, 0x40


def version(subpatch=False, lib_version=None):
    """liblmdb's version, ``(major, minor, patch)``, as py-lmdb's ``lmdb.version()``.
    lmdbloader reads one engine's files, LMDB 0.9's: ``lib_version`` may name
    it (0) and nothing else, as in a py-lmdb build with a single engine."""
    _engine(lib_version)
    v = tuple(_core.lmdb_version())
    return v + (0,) if subpatch else v


def enable_drop_gil():
    """Deprecated in py-lmdb and a no-op there; here too."""


_INT_MAX = (1 << 31) - 1
_SIZE_MAX = (1 << 64) - 1
# liblmdb maps map_size bytes: from 2^47 (the x86-64 user address space) up,
# mmap fails with ENOMEM, which py-lmdb raises as MemoryError.
_MAPPABLE = 1 << 47


def _uint(value, limit, default):
    """An integer argument as py-lmdb parses one: None keeps the default; the
    value is compared with 0 and the limit before it is taken as an integer,
    so a str fails the comparison (TypeError) and a float the conversion."""
    if value is None:
        return default
    if not value >= 0:
        raise OverflowError("Integer argument must be >= 0")
    if not value <= limit:
        raise OverflowError("Integer argument exceeds limit.")
    return operator.index(value)


def _flag(value, default):
    """A boolean argument as py-lmdb parses one: None keeps the default."""
    return default if value is None else bool(value)


def _engine(lib_version):
    """py-lmdb's check of ``lib_version=``: None or the major version of the
    one engine there is."""
    if lib_version is None:
        return
    if lib_version < 0:
        raise OverflowError("Integer argument must be >= 0")
    if lib_version != _core.lmdb_version()[0]:
        raise Error(f"lib_version={lib_version}: this build has no LMDB {lib_version}.x engine.")


def _readonly(call):
    raise ReadonlyError(f"{call}: Permission denied")


def _write_call(call):
    """A method of py-lmdb's write API: ReadonlyError, as py-lmdb on a read-only
    environment. Like py-lmdb, the attempt counts as a mutation of the
    transaction: its cursors re-read their current item on the next access."""
    def refuse(self, *args, **kwargs):
        self._check()
        txn = getattr(self, "txn", self)
        if isinstance(txn, Transaction):
            txn._mutations += 1
        _readonly(call)
    refuse.__name__ = call
    return refuse


def _type_name(obj):
    """The name CPython's own messages give obj's type (its tp_name)."""
    t = type(obj)
    if t.__module__ == "builtins" or t.__flags__ & (1 << 9):  # Py_TPFLAGS_HEAPTYPE
        return t.__name__
    return f"{t.__module__}.{t.__qualname__}"


def _buffer(obj):
    """The bytes of a key or value argument: any C-contiguous object with the
    buffer protocol (bytes, bytearray, memoryview, array, numpy), as py-lmdb's
    val_from_buffer() takes it, with the errors it gives."""
    if type(obj) is bytes:
        return obj
    if type(obj) is str:
        raise TypeError("Won't implicitly convert Unicode to bytes; use .encode()")
    try:
        view = memoryview(obj)
    except TypeError:
        raise TypeError(f"a bytes-like object is required, not '{_type_name(obj)}'") from None
    with view:
        if not view.c_contiguous:
            if isinstance(obj, memoryview):
                raise BufferError("memoryview: underlying buffer is not C-contiguous")
            raise ValueError(f"{type(obj).__name__} is not C-contiguous")
        return view.tobytes()


def _optional_buffer(obj):
    """A buffer argument py-lmdb parses with its argument table, where None
    means "not given": an empty key or value."""
    return b"" if obj is None else _buffer(obj)


def _key(key, call, allow_empty=False):
    """py-lmdb's checks of a key argument."""
    key = _buffer(key)
    if not key and not allow_empty:
        raise BadValsizeError(f"{call}: {_BAD_VALSIZE}")
    return key


def _db_arg(env, db, default):
    """A ``db=`` argument, checked as py-lmdb checks it: None means the
    default; anything but a database handle of this environment is refused."""
    if db is None:
        return default
    if not isinstance(db, _Database):
        raise TypeError("invalid type")
    if db._env is not env:
        raise Error("Database handle belongs to another environment.")
    return db


def open(path, map_size=10485760, subdir=True, readonly=False, metasync=True, sync=True,  # noqa: A001
         map_async=False, mode=0o755, create=True, readahead=True, writemap=False,
         meminit=True, max_readers=126, max_dbs=0, max_spare_txns=1, lock=True, lib_version=None, *,
         rss_budget=None, access_mode="auto", index_dir=None):
    """Opens an environment read-only, with py-lmdb's signature.

    ``readonly=False`` (py-lmdb's default) is accepted so that reading code
    runs unchanged; writes still raise ReadonlyError. ``lock`` keeps py-lmdb's
    meaning (True: use the lock file; pass False for read-only datasets).
    """
    return Environment(path, map_size=map_size, subdir=subdir, readonly=readonly, metasync=metasync,
                       sync=sync, map_async=map_async, mode=mode, create=create, readahead=readahead,
                       writemap=writemap, meminit=meminit, max_readers=max_readers, max_dbs=max_dbs,
                       max_spare_txns=max_spare_txns, lock=lock, lib_version=lib_version, rss_budget=rss_budget,
                       access_mode=access_mode, index_dir=index_dir)


class _Unpicklable:
    """py-lmdb's handles cannot be pickled (they hold a live environment)."""

    def __reduce_ex__(self, protocol):
        raise TypeError(f"cannot pickle {type(self).__name__!r} object")


class _Database(_Unpicklable):
    """A database handle, as returned by Environment.open_db()."""

    def __init__(self, env, reader, name):
        self._env = env
        self.reader = reader
        self.name = name
        self.db_flags = reader.db_flags

    def flags(self, *args):
        """py-lmdb's ``_Database.flags()``: the flags the database was created with."""
        f = self.db_flags
        return {"reverse_key": bool(f & _REVERSEKEY), "dupsort": bool(f & _DUPSORT),
                "integerkey": bool(f & _INTEGERKEY), "integerdup": bool(f & _INTEGERDUP),
                "dupfixed": bool(f & _DUPFIXED)}


class Environment:
    """A read-only LMDB environment (py-lmdb's ``lmdb.Environment``)."""

    def __init__(self, path, map_size=10485760, subdir=True, readonly=False, metasync=True, sync=True,
                 map_async=False, mode=0o755, create=True, readahead=True, writemap=False,
                 meminit=True, max_readers=126, max_dbs=0, max_spare_txns=1, lock=True, lib_version=None, *,
                 rss_budget=None, access_mode="auto", index_dir=None):
        self._closed = True  # until opened
        map_size = _uint(map_size, _SIZE_MAX, 10485760)
        subdir, readonly, metasync, sync, map_async, create, readahead, writemap, lock = (
            _flag(v, d) for v, d in ((subdir, True), (readonly, False), (metasync, True), (sync, True),
                                     (map_async, False), (create, True), (readahead, True),
                                     (writemap, False), (lock, True)))
        _uint(mode, _INT_MAX, 0o755)
        meminit = _uint(meminit, _INT_MAX, 1)
        max_readers = _uint(max_readers, _INT_MAX, 126)
        max_dbs = _uint(max_dbs, _INT_MAX, 0)
        max_spare_txns = _uint(max_spare_txns, _INT_MAX, 1)
        if path is None:
            raise TypeError("'path' argument required")
        if max_readers == 0:
            raise InvalidParameterError("mdb_env_set_maxreaders: Invalid argument")
        _engine(lib_version)
        self._lib_version = lib_version
        path = os.fspath(path)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not os.path.exists(path):
            raise Error(f"{path}: No such file or directory")
        if subdir and not os.path.isdir(path):
            raise Error(f"{path}: Not a directory")
        if not subdir and os.path.isdir(path):
            raise Error(f"{path}: Is a directory")
        self._path = path
        self._flags = {"subdir": bool(subdir), "readonly": bool(readonly), "metasync": bool(metasync),
                       "sync": bool(sync), "map_async": bool(map_async), "readahead": bool(readahead),
                       "writemap": bool(writemap), "meminit": bool(meminit), "lock": bool(lock)}
        self._map_size = map_size
        self._max_readers = max_readers
        self._max_dbs = max_dbs
        self._options = dict(rss_budget=rss_budget, mode=access_mode, lock=bool(lock), index_dir=index_dir)
        self._counts, self._names = {}, None
        self._main = _Database(self, self._open_reader(None), None)
        if map_size >= _MAPPABLE:
            raise MemoryError(f"{path}: Cannot allocate memory")
        self._named = {}
        self._readers = _ReaderTable(max_spare_txns)
        self._closed = False

    def _open_reader(self, name):
        try:
            return Reader(self._path, db=name, **self._options)
        except CorruptedError as e:
            if "not an LMDB file" in str(e):
                raise InvalidError(f"{self._path}: MDB_INVALID: File is not an LMDB file") from None
            raise
        except UnsupportedError as e:
            # py-lmdb's message for a data format it has no engine for.
            found = re.search(r"LMDB data format (\d+)", str(e))
            if found and self._lib_version is not None:
                # py-lmdb: an engine named explicitly that does not match the file.
                raise InvalidError(f"{self._path}: MDB_INVALID: File is not an LMDB file") from None
            if found:
                raise Error(f"{self._path}: LMDB data format v{found.group(1)} is not supported by this build.") from None
            raise
        except FileNotFoundError as e:
            raise Error(f"{self._path}: {e.strerror}") from None

    def _check(self):
        if self._closed:
            raise Error(_CLOSED)

    def _inspect(self, db=None):
        """LMDB's counts for `db`: read once per database (the environment is a snapshot)."""
        name = (db or self._main).name or b""
        if name not in self._counts:
            self._counts[name] = _core.inspect(self._path, name)
        return self._counts[name]

    def _named_databases(self):
        """Names of the named databases: one walk of the main tree, once."""
        if self._names is None:
            self._names = list(_core.named_databases(self._path))
        return self._names

    def open_db(self, key=None, txn=None, reverse_key=False, dupsort=False, create=True,
                integerkey=False, integerdup=False, dupfixed=False):
        """Handle of the named database ``key`` (bytes; None: the main one).
        The flags of an existing database win over those given, as in LMDB."""
        del reverse_key, dupsort, integerkey, integerdup, dupfixed
        if txn is not None and not isinstance(txn, Transaction):
            raise TypeError("invalid type")
        self._check()
        if key is None:
            return self._main
        # liblmdb takes the name as a C string: it ends at the first NUL.
        key = _key(key, "mdb_dbi_open", allow_empty=True).split(b"\0", 1)[0]
        if key in self._named:
            return self._named[key]
        if self._max_dbs < 1 + len(self._named):
            raise DbsFullError("mdb_dbi_open: MDB_DBS_FULL: Environment maxdbs limit reached "
                               "(Please use a larger Environment(max_dbs=) parameter)")
        if not key:
            raise BadValsizeError(f"mdb_dbi_open: {_BAD_VALSIZE}")
        if key not in self._named_databases():
            if self._main.reader.get(key) is not None:
                raise IncompatibleError(f"mdb_dbi_open: {_INCOMPATIBLE}")
            if _flag(create, True):
                _readonly("mdb_dbi_open")
            raise NotFoundError(f"mdb_dbi_open: {_NOTFOUND}")
        db = _Database(self, self._open_reader(os.fsdecode(key)), key)
        self._named[key] = db
        return db

    def lib_version(self):
        """The engine reading this environment, as py-lmdb's ``Environment.lib_version()``."""
        return version()

    def dbs(self, txn=None):
        """Names of the named databases, as py-lmdb's ``Environment.dbs()``."""
        self._check()
        return list(self._named_databases())

    def begin(self, db=None, parent=None, write=False, buffers=False):
        return Transaction(self, db=db, parent=parent, write=write, buffers=buffers)

    def stat(self):
        self._check()
        return _db_stat(self._inspect())

    def info(self):
        self._check()
        s = self._inspect()
        needed = (s["last_pgno"] + 1) * s["page_size"]
        # liblmdb: a map size of 0 takes the meta page's, and none is below the data's size.
        return {"map_addr": 0, "map_size": max(self._map_size or s["map_size"], needed), "last_pgno": s["last_pgno"],
                "last_txnid": s["last_txnid"], "max_readers": self._max_readers, "num_readers": 0}

    def path(self):
        self._check()
        return self._path

    def max_key_size(self):
        self._check()
        return _MAX_KEY

    def max_readers(self):
        self._check()
        return self._max_readers

    def flags(self):
        self._check()
        return dict(self._flags)

    def readers(self):
        self._check()
        # Opened without a reader table unless lock=True (liblmdb's answer
        # without a lock file); with it, this environment's transactions as
        # liblmdb lists them for py-lmdb.
        if not self._flags["lock"]:
            return "(no reader locks)\n"
        return self._readers.listing(self._inspect()["last_txnid"])

    def reader_check(self):
        self._check()
        return 0

    sync = _write_call("mdb_env_sync")
    def copy(self, path=None, compact=False, txn=None):
        """py-lmdb's ``copy``: a copy of the environment written to
        ``path``/data.mdb (an existing directory without one), as liblmdb
        makes it; ``compact=True`` leaves out free pages. The copy appears
        whole or not at all. ``txn`` is accepted (with ``compact``, as
        py-lmdb): the environment is one snapshot anyway."""
        self._check()
        if path is None:
            raise TypeError("path argument required")
        if txn is not None and not compact:
            raise TypeError("txn argument only compatible with compact=True")
        self._copy("mdb_env_copy3", _core.copy_environment, os.fsdecode(os.fspath(path)), bool(compact))

    def copyfd(self, fd=None, compact=False, txn=None):
        """py-lmdb's ``copyfd``: the same copy, written to file descriptor ``fd``."""
        self._check()
        if fd is None:
            raise TypeError("fd argument required")
        fd = _uint(fd, _INT_MAX, None)
        if txn is not None and not compact:
            raise TypeError("txn argument only compatible with compact=True")
        self._copy("mdb_env_copyfd3", _core.copy_environment_fd, fd, bool(compact))

    def _copy(self, call, copier, dest, compact):
        try:
            copier(self._path, dest, compact)
        except OSError as e:
            if e.errno is None:
                raise Error(f"{call}: {e}") from None
            raise Error(f"{call}: {os.strerror(e.errno)}") from None
        except CorruptedError as e:
            raise CorruptedError(f"{call}: {e}") from None

    def set_mapsize(self, map_size):
        """py-lmdb's ``set_mapsize``: allowed on a read-only environment, where
        it changes only the map size info() reports (0: the meta page's)."""
        self._check()
        map_size = _uint(map_size, _SIZE_MAX, 0)
        if map_size >= _MAPPABLE:
            self.close()  # as py-lmdb, whose environment is unusable after the failed remap
            raise MemoryError("mdb_env_set_mapsize: Cannot allocate memory")
        self._map_size = map_size

    def close(self):
        if self._closed:
            return
        self._closed = True
        self._main.reader.close()
        for db in self._named.values():
            db.reader.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getstate__(self):
        raise TypeError("lmdbloader.compat.Environment cannot be pickled, like py-lmdb's; "
                        "open it in each worker, or use lmdbloader.Reader, which pickles")


def _db_stat(s):
    return {"psize": s["page_size"], "depth": s["depth"], "branch_pages": s["branch_pages"],
            "leaf_pages": s["leaf_pages"], "overflow_pages": s["overflow_pages"],
            "entries": s["entries"]}


class _ReaderTable:
    """The reader slots liblmdb's lock file would hold for one environment
    opened with lock=True, so ``Environment.readers()`` lists what py-lmdb
    lists: a slot per read transaction object (its thread, and its snapshot
    until it ends, "-" after: py-lmdb resets an ended transaction and keeps
    its slot while the object lives); when the object dies, up to
    ``max_spare_txns`` slots stay as spares for later transactions and the
    rest are freed (mdb_txn_reset, then mdb_txn_abort)."""

    def __init__(self, max_spare):
        self._max_spare = max_spare
        self._slots = []   # per slot: [thread id, live] or None when free
        self._spares = []  # slots kept by ended transactions, reused last-in first

    def begin(self):
        if self._spares:
            slot = self._spares.pop()
            self._slots[slot][1] = True
            return slot
        entry = [threading.get_ident(), True]
        for slot, held in enumerate(self._slots):
            if held is None:
                self._slots[slot] = entry
                return slot
        self._slots.append(entry)
        return len(self._slots) - 1

    def end(self, slot):
        self._slots[slot][1] = False

    def release(self, slot):
        if len(self._spares) < self._max_spare:
            self._spares.append(slot)
        else:
            self._slots[slot] = None

    def listing(self, txnid):
        held = [s for s in self._slots if s is not None]
        if not held:
            return "(no active readers)\n"
        pid = os.getpid()
        return "    pid     thread     txnid\n" + "".join(
            f"{pid:10d} {tid:x} {txnid if live else '-'}\n" for tid, live in held)


class Transaction(_Unpicklable):
    """A read transaction (py-lmdb's ``lmdb.Transaction``). Reads see the
    database as it was when the environment was opened. With ``buffers=True``
    values come back as read-only ``memoryview`` objects, as in py-lmdb (here
    they stay valid after the transaction ends)."""

    def __init__(self, env=None, db=None, parent=None, write=False, buffers=False):
        if env is None:
            raise TypeError("'env' argument required")
        if not isinstance(env, Environment):
            raise TypeError("invalid type")
        db = _db_arg(env, db, None)
        env._check()
        if parent is not None:
            # Every transaction here is a read transaction, and LMDB nests
            # only write transactions (py-lmdb checks this first).
            if not isinstance(parent, Transaction):
                raise TypeError("invalid type")
            raise InvalidParameterError("Read-only transactions cannot be nested.: Invalid argument")
        if write:
            raise ReadonlyError("Cannot start write transaction with read-only environment.: Permission denied")
        self.env = env
        self._db = db or env._main
        self._buffers = bool(buffers)
        self._done = False
        self._mutations = 0  # write attempts (py-lmdb's TransObject.mutations)
        self._slot = env._readers.begin()

    def _check(self):
        if self._done or self.env._closed:
            raise Error(_CLOSED)

    def _value(self, v):
        return memoryview(v) if self._buffers and v is not None else v

    def get(self, key, default=None, db=None):
        self._check()
        if key is None:
            raise TypeError("key must be given.")
        key = _key(key, "mdb_get")
        db = _db_arg(self.env, db, self._db)
        if len(key) > _MAX_KEY:
            return default
        v = db.reader.get(key)
        return default if v is None else self._value(v)

    def cursor(self, db=None):
        self._check()
        return Cursor(_db_arg(self.env, db, self._db), self)

    def stat(self, db=None):
        self._check()
        return _db_stat(self.env._inspect(_db_arg(self.env, db, self._db)))

    def id(self):
        self._check()
        return self.env._inspect()["last_txnid"]

    def commit(self):
        self._check()
        self._end()

    def abort(self):
        self._end()

    def _end(self):
        if not self._done:
            self._done = True
            self.env._readers.end(self._slot)

    def __del__(self):  # py-lmdb aborts a transaction that was never ended
        if hasattr(self, "_slot"):
            self._end()
            self.env._readers.release(self._slot)

    # py-lmdb's write calls, as it answers them in a read-only transaction:
    # arguments checked first, then liblmdb's EACCES (ReadonlyError) from the
    # call that would write; pop() and a dupsort replace() look the key up
    # first and return None where it is missing.
    def put(self, key, value, dupdata=True, overwrite=True, append=False, db=None):
        self._check()
        _optional_buffer(key), _optional_buffer(value)
        _db_arg(self.env, db, self._db)
        self._mutations += 1
        _readonly("mdb_put")

    def replace(self, key, value, db=None):
        self._check()
        key = _optional_buffer(key)
        _optional_buffer(value)
        return Cursor(_db_arg(self.env, db, self._db), self).replace(key, value)

    def pop(self, key, db=None):
        self._check()
        key = _optional_buffer(key)
        return Cursor(_db_arg(self.env, db, self._db), self).pop(key)

    def delete(self, key, value=b"", db=None):
        self._check()
        _optional_buffer(key), _optional_buffer(value)
        _db_arg(self.env, db, self._db)
        self._mutations += 1
        _readonly("mdb_del")

    def drop(self, db=None, delete=True):
        self._check()
        if db is None:
            raise TypeError("'db' argument required.")
        _db_arg(self.env, db, self._db)
        self._mutations += 1
        _readonly("mdb_drop")

    def __enter__(self):
        self._check()
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None and not self._done:
            self.commit()
        else:
            self.abort()
        return False


class Cursor(_Unpicklable):
    """A cursor over one database (py-lmdb's ``lmdb.Cursor``) over the
    reader's positions: moves cost nothing, values are read on demand.

    It keeps the state LMDB's own cursor keeps (lmdb's mdb.c: initialized or
    not, the end-of-file flag, the key node it sits on, which may be the
    insertion point of a failed lookup, and the duplicate its sub-cursor sits
    on, if any), so that every move, failed ones and moves after failed ones
    included, lands where py-lmdb's does. py-lmdb's own "positioned" flag
    decides what key()/value() return."""

    _NEXT, _NEXT_DUP, _NEXT_NODUP, _PREV, _PREV_DUP, _PREV_NODUP = range(6)

    def __init__(self, db=None, txn=None):
        if (db is not None and not isinstance(db, _Database)) or (
                txn is not None and not isinstance(txn, Transaction)):
            raise TypeError("invalid type")
        if db is None or txn is None:
            raise TypeError("db and transaction parameters required.")
        _db_arg(txn.env, db, None)
        self.db = db
        self.txn = txn
        self._r = db.reader
        self._dupsort = bool(db.db_flags & _DUPSORT)
        self._starts = _group_starts(db) if self._dupsort else None
        self._groups = len(self._starts) - 1 if self._dupsort else len(self._r)
        self._init = False   # LMDB's C_INITIALIZED
        self._eof = False    # LMDB's C_EOF
        self._g = 0          # the key node (group of duplicates); _groups: past the end
        self._d = None       # the duplicate within it; None: sub-cursor not initialized
        # A failed lookup whose insertion point begins a leaf page leaves
        # LMDB's cursor past the last node of the page before (and its
        # sub-cursor likewise, in a tree of duplicates): _g (_d) is then the
        # node its next move reaches, not the one it sits on.
        self._page_end = False
        self._dup_page_end = False
        self._valid = False  # py-lmdb's "positioned"
        self._nokey = False  # key() is b"" (MDB_FIRST_DUP/LAST_DUP after a failed move)
        self._last_mutation = txn._mutations
        self._closed = False

    # -- helpers ---------------------------------------------------------------
    def _check(self):
        if self._closed:
            raise Error(_CLOSED)
        self.txn._check()

    def _ndups(self, g):
        return self._starts[g + 1] - self._starts[g] if self._dupsort else 1

    def _pos(self):
        return (self._starts[self._g] if self._dupsort else self._g) + (self._d or 0)

    def _group_key(self, g):
        return self._r.key(self._starts[g] if self._dupsort else g)

    def _hit(self, g, d):
        self._init, self._eof, self._g, self._d, self._valid = True, False, g, d, True
        self._page_end = self._dup_page_end = False
        self._nokey = False
        self._last_mutation = self.txn._mutations
        return True

    def _miss(self):
        self._valid = False
        self._last_mutation = self.txn._mutations
        return False

    def _refresh(self):
        """py-lmdb re-reads the current item (MDB_GET_CURRENT) after a mutation."""
        if self._last_mutation == self.txn._mutations:
            return
        self._last_mutation = self.txn._mutations
        ok = (self._init and self._g < self._groups and
              not (self._dupsort and self._ndups(self._g) > 1 and self._d is None))
        self._valid = ok
        self._nokey = False

    def _lower_group(self, key):
        """First key node whose key is >= `key` in the database's order."""
        f = self.db.db_flags
        if not f & (_INTEGERKEY | _REVERSEKEY):
            # Bytewise order: the reader's own index answers (one C++ binary search).
            pos = self._r.lower_bound(key)
            return bisect.bisect_left(self._starts, pos) if self._dupsort else pos
        probe = _order(key, f & _INTEGERKEY, f & _REVERSEKEY)
        lo, hi = 0, self._groups
        while lo < hi:
            mid = (lo + hi) // 2
            if _order(self._group_key(mid), f & _INTEGERKEY, f & _REVERSEKEY) < probe:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _lower_dup(self, g, value):
        f = self.db.db_flags
        probe = _order(value, f & _INTEGERDUP, f & _REVERSEDUP)
        lo, hi = 0, self._ndups(g)
        while lo < hi:
            mid = (lo + hi) // 2
            if _order(self._r[self._starts[g] + mid], f & _INTEGERDUP, f & _REVERSEDUP) < probe:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # -- reads -----------------------------------------------------------------
    def key(self):
        self._check()
        self._refresh()
        return self.txn._value(self._r.key(self._pos()) if self._valid and not self._nokey else b"")

    def value(self):
        self._check()
        self._refresh()
        return self.txn._value(self._r[self._pos()] if self._valid else b"")

    def item(self):
        return self.key(), self.value()

    def count(self):
        self._check()
        if not self._dupsort:
            raise IncompatibleError(f"mdb_cursor_count: {_INCOMPATIBLE}")
        if not self._init:
            raise InvalidParameterError("mdb_cursor_count: Invalid argument")
        if self._g >= self._groups or self._page_end:
            # Past the last key node of a page: liblmdb answers NOTFOUND at
            # the end of the file, and otherwise reads the slot after the last
            # node, which carries no duplicates.
            if self._eof:
                raise NotFoundError(f"mdb_cursor_count: {_NOTFOUND}")
            return 1
        self._eof = False
        n = self._ndups(self._g)
        if n > 1 and self._d is None:
            raise InvalidParameterError("mdb_cursor_count: Invalid argument")
        return n

    # -- moves (mdb_cursor_first/last/next/prev) -------------------------------
    def first(self):
        self._check()
        self._d = None
        self._page_end = self._dup_page_end = False
        return self._hit(0, 0) if self._groups else self._miss()

    def last(self):
        self._check()
        self._d = None
        self._page_end = self._dup_page_end = False
        return self._hit(self._groups - 1, self._ndups(self._groups - 1) - 1) if self._groups else self._miss()

    def _next(self, op):
        if not self._init:
            return self.first()
        if self._eof:
            if self._g >= self._groups - 1:
                return self._miss()
            self._eof = False
        if self._page_end:
            # Past the last node of a page: the slot read there carries no
            # duplicates, and the move goes on to the next page's first node.
            self._d = None
            if self._dupsort and op == self._NEXT_DUP:
                return self._miss()
            return self._hit(self._g, 0)
        if self._dupsort and self._g < self._groups:
            if self._ndups(self._g) > 1:
                if op in (self._NEXT, self._NEXT_DUP):
                    if self._d is None:
                        return self._hit(self._g, 0)
                    if self._dup_page_end:
                        return self._hit(self._g, self._d)
                    if self._d + 1 < self._ndups(self._g):
                        return self._hit(self._g, self._d + 1)
                    if op == self._NEXT_DUP:
                        return self._miss()
                # NEXT_NODUP leaves the sub-cursor as it is (MDB_CURSOR_UNREF is a no-op)
            else:
                self._d = None
                if op == self._NEXT_DUP:
                    return self._miss()
        if self._g + 1 >= self._groups:
            self._eof = True
            return self._miss()
        return self._hit(self._g + 1, 0)

    def _prev(self, op):
        if not self._init:
            return self.last()
        if self._dupsort and self._g < self._groups and not self._page_end:
            if self._ndups(self._g) > 1:
                if op in (self._PREV, self._PREV_DUP):
                    if self._d is None:
                        return self._hit(self._g, self._ndups(self._g) - 1)
                    if self._d > 0:
                        return self._hit(self._g, self._d - 1)
                    if op == self._PREV_DUP:
                        return self._miss()
            else:
                self._d = None
                if op == self._PREV_DUP:
                    return self._miss()
        self._eof = False
        if self._g == 0:
            return self._miss()
        g = min(self._g, self._groups) - 1
        return self._hit(g, self._ndups(g) - 1)

    def next(self):
        self._check()
        return self._next(self._NEXT)

    def next_dup(self):
        self._check()
        return self._next(self._NEXT_DUP)

    def next_nodup(self):
        self._check()
        return self._next(self._NEXT_NODUP)

    def prev(self):
        self._check()
        return self._prev(self._PREV)

    def prev_dup(self):
        self._check()
        return self._prev(self._PREV_DUP)

    def prev_nodup(self):
        self._check()
        return self._prev(self._PREV_NODUP)

    def _dup_end(self, last):
        self._check()
        if not self._init or not self._dupsort:
            self._miss()  # py-lmdb: any failed mdb_cursor_get unpositions
            if not self._init:
                raise InvalidParameterError("mdb_cursor_get: Invalid argument")
            raise IncompatibleError(f"mdb_cursor_get: {_INCOMPATIBLE}")
        if self._g >= self._groups or self._page_end:
            return self._miss()
        n = self._ndups(self._g)
        if n > 1 and self._d is None:  # duplicates, but the sub-cursor is not on them
            self._miss()
            raise InvalidParameterError("mdb_cursor_get: Invalid argument")
        had_key = self._valid and not self._nokey
        self._hit(self._g, n - 1 if last else 0)
        # From the sub-cursor LMDB returns the value only: py-lmdb's key stays
        # what the last move gave, empty after a failed one.
        self._nokey = n > 1 and not had_key
        return True

    def first_dup(self):
        return self._dup_end(False)

    def last_dup(self):
        return self._dup_end(True)

    # -- lookups (mdb_cursor_set) ----------------------------------------------
    def _set(self, key, exact):
        """MDB_SET / MDB_SET_RANGE: the key node found, or None with LMDB's
        cursor left at the insertion point."""
        self._d = None
        self._page_end = self._dup_page_end = False
        if not self._groups:
            return None
        g = self._lower_group(key)
        if g < self._groups and (not exact or self._group_key(g) == key):
            return g
        if exact and 0 < g < self._groups and g in _leaf_layout(self.db)[0]:
            self._page_end = True
        # Past the last key an initialized cursor keeps its end flag (liblmdb
        # answers from the page it is on); otherwise the search clears it.
        if g < self._groups or not self._init:
            self._eof = False
        self._init, self._g = True, g
        return None

    def set_key(self, key):
        self._check()
        key = _buffer(key)
        if not key:
            self._miss()
            raise BadValsizeError(f"mdb_cursor_get: {_BAD_VALSIZE}")
        g = self._set(key, exact=True)
        return self._hit(g, 0) if g is not None else self._miss()

    def set_range(self, key):
        self._check()
        key = _buffer(key)
        if not key:
            return self.first()  # py-lmdb's own rule
        g = self._set(key, exact=False)
        return self._hit(g, 0) if g is not None else self._miss()

    def _set_dup(self, key, value, exact):
        self._check()
        key, value = _optional_buffer(key), _optional_buffer(value)
        if not self._dupsort:
            self._miss()  # py-lmdb: any failed mdb_cursor_get unpositions
            raise IncompatibleError(f"mdb_cursor_get: {_INCOMPATIBLE}")
        if not key:
            self._miss()
            raise BadValsizeError(f"mdb_cursor_get: {_BAD_VALSIZE}")
        g = self._set(key, exact=True)
        if g is None:
            return self._miss()
        self._init, self._eof, self._g = True, False, g
        d = self._lower_dup(g, value)
        if d < self._ndups(g) and (not exact or self._r[self._starts[g] + d] == value):
            return self._hit(g, d)
        if self._ndups(g) > 1:
            # The sub-cursor's own search initialized it at the insertion
            # point (the end when every duplicate is smaller): later
            # first_dup/last_dup/count answer and next_dup/prev_dup move from
            # there.
            self._d = d
            self._dup_page_end = 0 < d < self._ndups(g) and d in _leaf_layout(self.db)[1].get(g, ())
        return self._miss()

    def set_key_dup(self, key, value):
        return self._set_dup(key, value, exact=True)

    def set_range_dup(self, key, value):
        return self._set_dup(key, value, exact=False)

    def get(self, key, default=None):
        if key is None:
            raise TypeError("key must be given.")
        return self.value() if self.set_key(key) else default

    def getmulti(self, keys, dupdata=False, dupfixed_bytes=None, keyfixed=False, values=True):
        """(key, value) of each key found, every duplicate with ``dupdata``, as py-lmdb."""
        self._check()
        dupdata, keyfixed, values = _flag(dupdata, False), _flag(keyfixed, False), _flag(values, True)
        dupfixed_bytes = _uint(dupfixed_bytes, _SIZE_MAX, 0)
        if (dupfixed_bytes or keyfixed) and not dupdata:
            raise TypeError("dupdata is required for dupfixed_bytes/keyfixed.")
        if keyfixed and not dupfixed_bytes:
            raise TypeError("dupfixed_bytes is required for keyfixed.")
        if not values and dupdata:
            raise TypeError("values=False is incompatible with dupdata.")
        if values and not dupdata:
            # One batched read for every key found: all reads in flight at once.
            found = []
            for key in keys:
                if self.set_key(key):
                    found.append((bytes(self.key()), self._pos()))
            batch = self._r.get_batch([pos for _, pos in found])
            return [(self.txn._value(k), self.txn._value(v)) for (k, _), v in zip(found, batch)]
        out, packed = [], bytearray()
        for key in keys:
            if not self.set_key(key):
                continue
            if not values:
                out.append(self.key())
                continue
            if dupfixed_bytes:
                k = bytes(self.key())
                for block in self._multiple_blocks():
                    for i in range(0, len(block) - dupfixed_bytes + 1, dupfixed_bytes):
                        if keyfixed:
                            packed.extend(k + block[i:i + dupfixed_bytes])
                        else:
                            out.append((self.txn._value(k), self.txn._value(block[i:i + dupfixed_bytes])))
                self._valid = False  # MDB_NEXT_MULTIPLE ran past the last page
                continue
            while self._valid:
                out.append((self.txn._value(bytes(self.key())), self.txn._value(bytes(self.value()))))
                self.next_dup()
        return memoryview(packed) if keyfixed else out

    def _multiple_blocks(self):
        """What MDB_GET_MULTIPLE and then MDB_NEXT_MULTIPLE return for the key
        the cursor is on: the duplicates of each leaf page of its tree of
        duplicates (or of its sub-page), packed (lmdb's mdb.c, fetchm). Only a
        MDB_DUPFIXED database has them: any other gives MDB_INCOMPATIBLE."""
        if not (self._dupsort and self.db.db_flags & _DUPFIXED):  # DUPFIXED means nothing without DUPSORT
            self._valid = False  # py-lmdb: a failed get leaves the cursor unpositioned
            raise IncompatibleError(f"mdb_cursor_get: {_INCOMPATIBLE}")
        g, first = self._g, self._starts[self._g]
        n = self._ndups(g)
        bounds = sorted({0, n} | set(_leaf_layout(self.db)[1].get(g, ())))
        values = self._r.get_batch(range(first, first + n))
        return [b"".join(values[a:b]) for a, b in zip(bounds, bounds[1:])]

    # -- iteration (py-lmdb's _iter) -------------------------------------------
    def _iter(self, step, keys, values):
        # py-lmdb's choice: no values gives keys (also with keys=False).
        get = self.key if not values else self.value if not keys else self.item
        while self._valid:
            yield get()
            step()

    def iternext(self, keys=True, values=True):
        self._check()
        keys, values = _flag(keys, True), _flag(values, True)
        if not self._valid:
            self.first()
        return self._iter(self.next, keys, values)

    def iternext_dup(self, keys=False, values=True):
        self._check()
        keys, values = _flag(keys, False), _flag(values, True)
        return self._iter(self.next_dup, keys, values)

    def iternext_nodup(self, keys=True, values=False):
        self._check()
        keys, values = _flag(keys, True), _flag(values, False)
        if not self._valid:
            self.first()
        return self._iter(self.next_nodup, keys, values)

    def iterprev(self, keys=True, values=True):
        self._check()
        keys, values = _flag(keys, True), _flag(values, True)
        if not self._valid:
            self.last()
        return self._iter(self.prev, keys, values)

    def iterprev_dup(self, keys=False, values=True):
        self._check()
        keys, values = _flag(keys, False), _flag(values, True)
        return self._iter(self.prev_dup, keys, values)

    def iterprev_nodup(self, keys=True, values=False):
        self._check()
        keys, values = _flag(keys, True), _flag(values, False)
        if not self._valid:
            self.last()
        return self._iter(self.prev_nodup, keys, values)

    def __iter__(self):
        return self.iternext()

    # py-lmdb's write calls in a read-only transaction (see Transaction.put).
    def put(self, key, value, dupdata=True, overwrite=True, append=False):
        self._check()
        _optional_buffer(key), _optional_buffer(value)
        self.txn._mutations += 1
        _readonly("mdb_put")

    def putmulti(self, items, dupdata=True, overwrite=True, append=False):
        """(0, 0) for no items; the first item fails as its put would."""
        self._check()
        for i, item in enumerate(items):
            if type(item) is not tuple or len(item) != 2:
                raise TypeError("putmulti() elements must be 2-tuples")
            _buffer(item[0]), _buffer(item[1])
            self.txn._mutations += 1
            _readonly(f"mdb_cursor_put() element #{i}")
        return (0, 0)

    def replace(self, key, value):
        self._check()
        key = _optional_buffer(key)
        _optional_buffer(value)
        if self._dupsort:
            # py-lmdb deletes the key's duplicates before it puts the value.
            if self.set_key(key):
                self.txn._mutations += 1
                _readonly("mdb_cursor_del")
            _readonly("mdb_put")
        self.txn._mutations += 1
        _readonly("mdb_put")

    def pop(self, key):
        self._check()
        if not self.set_key(_optional_buffer(key)):
            return None
        self.txn._mutations += 1
        _readonly("mdb_cursor_del")

    def delete(self, dupdata=False):
        """False on an unpositioned cursor, as py-lmdb; otherwise ReadonlyError."""
        self._check()
        if not self._valid:
            return False
        self.txn._mutations += 1
        _readonly("mdb_cursor_del")

    def close(self):
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _order(key, integer, reverse):
    """A sort key giving LMDB's order: integer keys as native unsigned
    integers, reversed keys compared from their last byte."""
    if integer:
        return int.from_bytes(key, sys.byteorder)
    return key[::-1] if reverse else key


def _leaf_layout(db):
    """Where db's leaf pages begin (cached per database): the keys that begin
    one, and per key with a tree of duplicates, the duplicates that begin one.
    Read only when a failed lookup needs it: one walk of the tree."""
    layout = getattr(db, "_layout", None)
    if layout is None:
        try:
            keys, dups = _core.leaf_layout(db._env._path, db.name or b"")
        except UnsupportedError:
            # A shard set is no LMDB of py-lmdb's: its cursor runs over the
            # parts as over one sequence of keys.
            keys, dups = [], {}
        layout = db._layout = (frozenset(keys), {g: frozenset(d) for g, d in dups.items()})
    return layout


def _group_starts(db):
    """Positions where each key's run of duplicates starts, plus the end (cached per database)."""
    starts = getattr(db, "_starts", None)
    if starts is None:
        r = db.reader
        starts, prev = [], None
        for i in range(len(r)):
            k = r.key(i)
            if k != prev:
                starts.append(i)
                prev = k
        starts.append(len(r))
        db._starts = starts
    return starts
