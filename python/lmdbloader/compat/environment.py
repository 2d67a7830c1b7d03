"""py-lmdb's Environment and open(): the environment opened read-only over lmdbloader
Readers, one per database."""

import os

from .. import _core
from .._options import KINDS as OPTION_KINDS
from .._options import option_texts
from ..errors import CorruptedError, Error, UnsupportedError
from ..reader import Reader
from ._arguments import (
    INT_MAX,
    MAPPABLE,
    SIZE_MAX,
    as_key,
    check_engine,
    engine_version,
    flag_arg,
    refuse_write,
    uint_arg,
    write_call,
)
from ._handles import Database, EnvironmentBase, ReaderTable, db_stat
from ._messages import BAD_VALSIZE, INCOMPATIBLE, MAX_KEY, NOTFOUND
from .errors import (
    BadValsizeError,
    DbsFullError,
    IncompatibleError,
    InvalidError,
    InvalidParameterError,
    MemoryError,
    NotFoundError,
)
from .transaction import Transaction

# Reader options whose names py-lmdb's open() already gives another meaning.
_PYLMDB_NAMED = ("mode", "lock", "db")
_OPEN_OPTION_KINDS = {k: v for k, v in OPTION_KINDS.items() if k not in _PYLMDB_NAMED}


def version(subpatch=False, lib_version=None):
    """LMDB's version, ``(major, minor, patch)``, as py-lmdb 3's ``lmdb.version()``:
    liblmdb's (0.9) by default, and with ``lib_version=1`` the LMDB 1.0
    release whose files lmdbloader also reads (1.0.2, py-lmdb 3.0's)."""
    check_engine(lib_version)
    v = engine_version(lib_version)
    return v + (0,) if subpatch else v


def enable_drop_gil():
    """Deprecated in py-lmdb and a no-op there; here too."""


def open(path, map_size=10485760, subdir=True, readonly=False, metasync=True, sync=True,  # noqa: A001
         map_async=False, mode=0o755, create=True, readahead=True, writemap=False,
         meminit=True, max_readers=126, max_dbs=0, max_spare_txns=1, lock=True, lib_version=None, *,
         rss_budget=None, access_mode="auto", index_dir=None, **reader_options):
    """Opens an environment read-only, with py-lmdb's signature.

    ``readonly=False`` (py-lmdb's default) is accepted so that reading code
    runs unchanged; writes still raise ReadonlyError. ``lock`` keeps py-lmdb's
    meaning (True: use the lock file; pass False for read-only datasets).
    Every other option of ``lmdbloader.Reader`` is a keyword too (``rss_budget``,
    ``index_dir``, ``verify_checksums``, ``io_engine``, ``queue_depth``, ``cache``,
    ``mmap_window``, ``remap_every``), except the three whose names py-lmdb
    already uses: the Reader's ``mode`` is ``access_mode`` here (py-lmdb's
    ``mode`` is the file mode), ``lock`` is py-lmdb's own, and the named
    database is chosen with ``open_db``.
    """
    return Environment(path, map_size=map_size, subdir=subdir, readonly=readonly, metasync=metasync,
                       sync=sync, map_async=map_async, mode=mode, create=create, readahead=readahead,
                       writemap=writemap, meminit=meminit, max_readers=max_readers, max_dbs=max_dbs,
                       max_spare_txns=max_spare_txns, lock=lock, lib_version=lib_version, rss_budget=rss_budget,
                       access_mode=access_mode, index_dir=index_dir, **reader_options)


class Environment(EnvironmentBase):
    """A read-only LMDB environment (py-lmdb's ``lmdb.Environment``)."""

    def __init__(self, path, map_size=10485760, subdir=True, readonly=False, metasync=True, sync=True,
                 map_async=False, mode=0o755, create=True, readahead=True, writemap=False,
                 meminit=True, max_readers=126, max_dbs=0, max_spare_txns=1, lock=True, lib_version=None, *,
                 rss_budget=None, access_mode="auto", index_dir=None, **reader_options):
        super().__init__()  # closed until opened
        state = self._state
        # The Reader's options by the core's one list, less the three py-lmdb
        # names its own arguments (mode, lock, db): an unknown keyword is a
        # TypeError naming it, as from Reader.
        option_texts(reader_options, _OPEN_OPTION_KINDS, "open")
        map_size = uint_arg(map_size, SIZE_MAX, 10485760)
        subdir, readonly, metasync, sync, map_async, create, readahead, writemap, lock = (
            flag_arg(v, d) for v, d in ((subdir, True), (readonly, False), (metasync, True), (sync, True),
                                     (map_async, False), (create, True), (readahead, True),
                                     (writemap, False), (lock, True)))
        uint_arg(mode, INT_MAX, 0o755)
        meminit = uint_arg(meminit, INT_MAX, 1)
        max_readers = uint_arg(max_readers, INT_MAX, 126)
        max_dbs = uint_arg(max_dbs, INT_MAX, 0)
        max_spare_txns = uint_arg(max_spare_txns, INT_MAX, 1)
        if path is None:
            raise TypeError("'path' argument required")
        if max_readers == 0:
            raise InvalidParameterError("mdb_env_set_maxreaders: Invalid argument")
        check_engine(lib_version)
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
        state.path = path
        self._flags = {"subdir": bool(subdir), "readonly": bool(readonly), "metasync": bool(metasync),
                       "sync": bool(sync), "map_async": bool(map_async), "readahead": bool(readahead),
                       "writemap": bool(writemap), "meminit": bool(meminit), "lock": bool(lock)}
        self._map_size = map_size
        self._max_readers = max_readers
        self._max_dbs = max_dbs
        self._options = dict(reader_options, rss_budget=rss_budget, mode=access_mode, lock=bool(lock),
                             index_dir=index_dir)
        self._names = None
        state.main = Database(self, self._open_reader(None), None)
        # LMDB's data format 1 is LMDB 0.9's, 3 LMDB 1.0's: lib_version=None
        # opens either, as py-lmdb 3's default does, a named engine only its own.
        self._engine = 1 if state.main.reader.stats()["lmdb_format"] == 3 else 0
        if lib_version is not None and lib_version != self._engine:
            raise InvalidError(f"{path}: MDB_INVALID: File is not an LMDB file")
        if map_size >= MAPPABLE:
            raise MemoryError(f"{path}: Cannot allocate memory")
        self._named = {}
        state.readers = ReaderTable(max_spare_txns)
        state.closed = False

    def _open_reader(self, name):
        try:
            return Reader(self._state.path, db=name, **self._options)
        except CorruptedError as e:
            if getattr(e, "reason", None) == "not_lmdb":
                raise InvalidError(f"{self._state.path}: MDB_INVALID: File is not an LMDB file") from None
            raise
        except UnsupportedError as e:
            if getattr(e, "reason", None) != "lmdb_format":
                raise
            if self._lib_version is not None:
                # py-lmdb: an engine named explicitly that does not match the file.
                raise InvalidError(f"{self._state.path}: MDB_INVALID: File is not an LMDB file") from None
            # py-lmdb's message for a data format it has no engine for.
            raise Error(f"{self._state.path}: LMDB data format v{e.lmdb_format} is not supported by this build.") from None
        except FileNotFoundError as e:
            raise Error(f"{self._state.path}: {e.strerror}") from None

    def _named_databases(self):
        """Names of the named databases: one walk of the main tree, once."""
        if self._names is None:
            self._names = list(_core.named_databases(self._state.path))
        return self._names

    def open_db(self, key=None, txn=None, reverse_key=False, dupsort=False, create=True,
                integerkey=False, integerdup=False, dupfixed=False):
        """Handle of the named database ``key`` (bytes; None: the main one).
        The flags of an existing database win over those given, as in LMDB."""
        del reverse_key, dupsort, integerkey, integerdup, dupfixed
        if txn is not None and not isinstance(txn, Transaction):
            raise TypeError("invalid type")
        self._state.check()
        if key is None:
            return self._state.main
        # liblmdb takes the name as a C string: it ends at the first NUL.
        key = as_key(key, "mdb_dbi_open", allow_empty=True).split(b"\0", 1)[0]
        if key in self._named:
            return self._named[key]
        if self._max_dbs < 1 + len(self._named):
            raise DbsFullError("mdb_dbi_open: MDB_DBS_FULL: Environment maxdbs limit reached "
                               "(Please use a larger Environment(max_dbs=) parameter)")
        if not key:
            raise BadValsizeError(f"mdb_dbi_open: {BAD_VALSIZE}")
        if key not in self._named_databases():
            if self._state.main.reader.get(key) is not None:
                raise IncompatibleError(f"mdb_dbi_open: {INCOMPATIBLE}")
            if flag_arg(create, True):
                refuse_write("mdb_dbi_open")
            raise NotFoundError(f"mdb_dbi_open: {NOTFOUND}")
        db = Database(self, self._open_reader(os.fsdecode(key)), key)
        self._named[key] = db
        return db

    def lib_version(self):
        """The engine reading this environment, as py-lmdb's ``Environment.lib_version()``:
        (1, 0, 2) for an LMDB 1.0 file."""
        return engine_version(self._engine)

    def dbs(self, txn=None):
        """Names of the named databases, as py-lmdb's ``Environment.dbs()``."""
        self._state.check()
        return list(self._named_databases())

    def begin(self, db=None, parent=None, write=False, buffers=False):
        return Transaction(self, db=db, parent=parent, write=write, buffers=buffers)

    def stat(self):
        self._state.check()
        return db_stat(self._state.inspect())

    def info(self):
        self._state.check()
        s = self._state.inspect()
        needed = (s["last_pgno"] + 1) * s["page_size"]
        # liblmdb: a map size of 0 takes the meta page's, and none is below the data's size.
        return {"map_addr": 0, "map_size": max(self._map_size or s["map_size"], needed), "last_pgno": s["last_pgno"],
                "last_txnid": s["last_txnid"], "max_readers": self._max_readers, "num_readers": 0}

    def path(self):
        self._state.check()
        return self._state.path

    def max_key_size(self):
        self._state.check()
        return MAX_KEY

    def max_readers(self):
        self._state.check()
        return self._max_readers

    def flags(self):
        self._state.check()
        return dict(self._flags)

    def readers(self):
        self._state.check()
        # Opened without a reader table unless lock=True (liblmdb's answer
        # without a lock file); with it, this environment's transactions as
        # liblmdb lists them for py-lmdb.
        if not self._flags["lock"]:
            return "(no reader locks)\n"
        return self._state.readers.listing(self._state.inspect()["last_txnid"])

    def reader_check(self):
        self._state.check()
        return 0

    sync = write_call("mdb_env_sync")
    def copy(self, path=None, compact=False, txn=None):
        """py-lmdb's ``copy``: a copy of the environment written to
        ``path``/data.mdb (an existing directory without one), as liblmdb
        makes it; ``compact=True`` leaves out free pages. The copy appears
        whole or not at all. ``txn`` is accepted (with ``compact``, as
        py-lmdb): the environment is one snapshot anyway."""
        self._state.check()
        if path is None:
            raise TypeError("path argument required")
        if txn is not None and not compact:
            raise TypeError("txn argument only compatible with compact=True")
        self._copy("mdb_env_copy3", _core.copy_environment, os.fsdecode(os.fspath(path)), bool(compact))

    def copyfd(self, fd=None, compact=False, txn=None):
        """py-lmdb's ``copyfd``: the same copy, written to file descriptor ``fd``."""
        self._state.check()
        if fd is None:
            raise TypeError("fd argument required")
        fd = uint_arg(fd, INT_MAX, None)
        if txn is not None and not compact:
            raise TypeError("txn argument only compatible with compact=True")
        self._copy("mdb_env_copyfd3", _core.copy_environment_fd, fd, bool(compact))

    def _copy(self, call, copier, dest, compact):
        try:
            copier(self._state.path, dest, compact)
        except OSError as e:
            if e.errno is None:
                raise Error(f"{call}: {e}") from None
            raise Error(f"{call}: {os.strerror(e.errno)}") from None
        except CorruptedError as e:
            raise CorruptedError(f"{call}: {e}") from None

    def set_mapsize(self, map_size):
        """py-lmdb's ``set_mapsize``: allowed on a read-only environment, where
        it changes only the map size info() reports (0: the meta page's)."""
        self._state.check()
        map_size = uint_arg(map_size, SIZE_MAX, 0)
        if map_size >= MAPPABLE:
            self.close()  # as py-lmdb, whose environment is unusable after the failed remap
            raise MemoryError("mdb_env_set_mapsize: Cannot allocate memory")
        self._map_size = map_size

    def close(self):
        if self._state.closed:
            return
        self._state.closed = True
        self._state.main.reader.close()
        for db in self._named.values():
            db.reader.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getstate__(self):
        raise TypeError("lmdbloader.compat.Environment cannot be pickled, like py-lmdb's; "
                        "open it in each worker, or use lmdbloader.Reader, which pickles")
