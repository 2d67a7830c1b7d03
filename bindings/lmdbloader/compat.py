"""The read-only part of py-lmdb's API, on top of lmdbloader.Reader.

Existing dataset code switches by changing its import::

    import lmdbloader.compat as lmdb
    env = lmdb.open(path, readonly=True, lock=False, readahead=False, meminit=False)
    with env.begin(write=False) as txn:
        value = txn.get(key)

and then reads under a memory budget: the ``rss_budget`` keyword of
:func:`open` or the LMDBLOADER_RSS_BUDGET environment variable. Values come
back as ``bytes``, exactly as py-lmdb returns them. Every write request
(``begin(write=True)``, ``put``, ``delete``, ...) raises :class:`ReadonlyError`.
py-lmdb keywords that only tune LMDB itself (``readahead``, ``meminit``,
``max_readers``, ``map_size``, ...) are accepted and have nothing to do: the
reader never maps what it reads. Unknown keywords raise ``TypeError``.
"""

import os

from . import _core
from .errors import Error, ReadonlyError
from .reader import Reader

__all__ = ["open", "Environment", "Transaction", "Cursor", "Error", "ReadonlyError",
           "NotFoundError"]


class NotFoundError(Error):
    """A named database that does not exist."""


def _readonly(what):
    raise ReadonlyError(f"{what}: lmdbloader.compat is read-only (use py-lmdb or "
                        f"`lmdbloader convert` to write)")


def _write_call(what):
    """A method of py-lmdb's write API that raises ReadonlyError naming itself."""
    def refuse(self, *args, **kwargs):
        _readonly(what)
    refuse.__name__ = what.split(".")[-1].rstrip("()")
    return refuse


def open(path, map_size=10485760, subdir=True, readonly=False, metasync=True, sync=True,
         map_async=False, mode=0o755, create=True, readahead=True, writemap=False,
         meminit=True, max_readers=126, max_dbs=0, max_spare_txns=1, lock=True, *,
         rss_budget=None, access_mode="auto", index_dir=None):
    """Opens an environment read-only, with py-lmdb's signature.

    ``readonly=False`` (py-lmdb's default) is accepted so that reading code
    runs unchanged; writes still raise ReadonlyError. ``lock`` keeps py-lmdb's
    meaning (True: use the lock file; pass False for read-only datasets).
    """
    del map_size, metasync, sync, map_async, mode, create, readahead, writemap, meminit
    del max_readers, max_spare_txns
    path = os.fspath(path)
    if subdir and os.path.isfile(path):
        raise Error(f"{path}: subdir=True but the path is a file (pass subdir=False)")
    return Environment(path, lock=bool(lock), max_dbs=max_dbs, rss_budget=rss_budget,
                       access_mode=access_mode, index_dir=index_dir)


class _Database:
    """A database handle, as returned by Environment.open_db()."""

    def __init__(self, reader, name):
        self.reader = reader
        self.name = name


class Environment:
    """A read-only LMDB environment (py-lmdb's ``lmdb.Environment``)."""

    def __init__(self, path, *, lock=True, max_dbs=0, rss_budget=None, access_mode="auto",
                 index_dir=None):
        self._path = path
        self._options = dict(rss_budget=rss_budget, mode=access_mode, lock=lock,
                             index_dir=index_dir)
        self._max_dbs = max_dbs
        self._main = _Database(Reader(path, **self._options), None)
        self._named = {}
        self._closed = False

    def _check(self):
        if self._closed:
            raise Error(f"{self._path}: environment is closed")

    def open_db(self, key=None, txn=None, reverse_key=False, dupsort=False, create=True,
                integerkey=False, integerdup=False, dupfixed=False):
        """Handle of the named database ``key`` (bytes or str; None: the main one)."""
        del txn, create
        self._check()
        if key is None:
            return self._main
        if dupsort or integerdup or dupfixed:
            raise Error("dupsort databases are not supported by lmdbloader")
        if reverse_key or integerkey:
            raise Error("reverse_key / integerkey databases are not supported by lmdbloader")
        name = key.decode("utf-8") if isinstance(key, bytes) else key
        if self._max_dbs < 1:
            raise Error("open_db: named databases need max_dbs >= 1 (as in py-lmdb)")
        if name not in self._named:
            try:
                self._named[name] = _Database(Reader(self._path, db=name, **self._options), name)
            except KeyError:
                raise NotFoundError(f"{self._path}: no database named {name!r}") from None
        return self._named[name]

    def begin(self, db=None, parent=None, write=False, buffers=False):
        del parent, buffers
        self._check()
        if write:
            _readonly("begin(write=True)")
        return Transaction(self, db or self._main)

    def stat(self):
        self._check()
        return _db_stat(self._main)

    def info(self):
        self._check()
        s = _inspect(self._main)
        return {"map_addr": 0, "map_size": s["map_size"], "last_pgno": s["file_bytes"] // s["page_size"] - 1,
                "last_txnid": s["last_txnid"], "max_readers": 126, "num_readers": 0}

    def path(self):
        return self._path

    def max_key_size(self):
        return 511

    def flags(self):
        return {"subdir": os.path.isdir(self._path), "readonly": True, "metasync": True,
                "sync": True, "map_async": False, "readahead": False, "writemap": False,
                "meminit": False, "lock": self._options["lock"]}

    def readers(self):
        return "(no reader table: lmdbloader opens without one unless lock=True)\n"

    def reader_check(self):
        return 0

    sync = _write_call("sync()")
    copy = _write_call("copy()")
    set_mapsize = _write_call("set_mapsize()")

    def close(self):
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


def _inspect(db):
    return _core.inspect(db.reader.path, db.name or "")


def _db_stat(db):
    s = _inspect(db)
    return {"psize": s["page_size"], "depth": s["depth"], "branch_pages": s["branch_pages"],
            "leaf_pages": s["leaf_pages"], "overflow_pages": s["overflow_pages"],
            "entries": s["entries"]}


class Transaction:
    """A read transaction (py-lmdb's ``lmdb.Transaction``). Reads see the
    database as it was when the environment was opened."""

    def __init__(self, env, db):
        self.env = env
        self._db = db

    def _reader(self, db):
        return (db or self._db).reader

    def get(self, key, default=None, db=None):
        return self._reader(db).get(key, default)

    def cursor(self, db=None):
        return Cursor(db or self._db, self)

    def stat(self, db):
        return _db_stat(db)

    def id(self):
        return 0

    def commit(self):
        pass

    def abort(self):
        pass

    put = _write_call("Transaction.put()")
    replace = _write_call("Transaction.replace()")
    pop = _write_call("Transaction.pop()")
    delete = _write_call("Transaction.delete()")
    drop = _write_call("Transaction.drop()")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class Cursor:
    """A cursor over one database (py-lmdb's ``lmdb.Cursor``), positioned by
    record position: moves cost nothing, values are read on demand."""

    def __init__(self, db, txn):
        self.db = db
        self.txn = txn
        self._r = db.reader
        self._pos = -1  # -1: unpositioned

    def _at(self, pos):
        self._pos = pos if 0 <= pos < len(self._r) else -1
        return self._pos >= 0

    def first(self):
        return self._at(0)

    def last(self):
        return self._at(len(self._r) - 1)

    def next(self):
        return self._at(0 if self._pos < 0 else self._pos + 1)

    def prev(self):
        return self._at(len(self._r) - 1 if self._pos < 0 else self._pos - 1)

    next_nodup = next
    prev_nodup = prev

    def set_key(self, key):
        try:
            return self._at(self._r.index_of(key))
        except KeyError:
            return self._at(-1)

    def set_range(self, key):
        return self._at(self._r.lower_bound(key))

    def get(self, key, default=None):
        return self.value() if self.set_key(key) else default

    def key(self):
        return self._r.key(self._pos) if self._pos >= 0 else b""

    def value(self):
        return self._r[self._pos] if self._pos >= 0 else b""

    def item(self):
        return self.key(), self.value()

    def count(self):
        return 1

    def _iterate(self, step, start, keys, values):
        if self._pos < 0 and not start():
            return
        while self._pos >= 0:
            if keys and values:
                yield self.item()
            elif keys:
                yield self.key()
            else:
                yield self.value()
            step()

    def iternext(self, keys=True, values=True):
        return self._iterate(self.next, self.first, keys, values)

    def iterprev(self, keys=True, values=True):
        return self._iterate(self.prev, self.last, keys, values)

    iternext_nodup = iternext
    iterprev_nodup = iterprev

    def __iter__(self):
        return self.iternext()

    put = _write_call("Cursor.put()")
    delete = _write_call("Cursor.delete()")
    replace = _write_call("Cursor.replace()")
    pop = _write_call("Cursor.pop()")

    def close(self):
        self._pos = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
