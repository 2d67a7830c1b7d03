"""lmdbloader.Reader: random access to an LMDB database under a memory budget."""

import json
import numbers
import os

import numpy as np

from . import _core
from ._options import reader_option_texts
from .errors import CorruptedError


def _path_text(path):
    """A path (str, bytes, os.PathLike) as str, or a list or tuple of them as
    a list of str: the databases of a set of files."""
    def one(p):
        if not isinstance(p, (str, bytes, os.PathLike)):
            raise TypeError(f"path must be a str, bytes or os.PathLike, or a list of them; got {type(p).__name__}")
        return os.fsdecode(os.fspath(p))
    if isinstance(path, (list, tuple)):
        if not path:
            raise ValueError("a list of databases to read needs at least one path")
        return [one(p) for p in path]
    return one(path)


class Reader:
    """Reads records of an LMDB database, corpus or shard set by position or key.

    ``path`` may also name many ordinary LMDB databases read as one dataset,
    positions running on from one to the next: a folder of ``*.lmdb`` /
    ``*.mdb`` files or of folders holding data.mdb, or a glob, in sorted
    order; or a list of paths, in its order. Each file is opened (its
    descriptors, its record index) while it is read, a bounded number at once
    (a quarter of the descriptor limit, 64 at most), so the descriptors do
    not grow with the file count, and a closed file costs its path and record
    count (about 45 bytes). The open reads every file's meta pages for its
    count, which ``len()`` and positions need (about 10 us a file). What looks like one
    of the set's databases and is none (a ``*.lmdb`` file that is no LMDB, a
    folder named ``*.lmdb`` or holding lock.mdb without data.mdb) is an
    error naming it; ``skip_bad_files`` leaves such files out
    (``stats()["files_skipped"]``); :attr:`files` lists those read.
    Keys are each file's own: ``get(key)`` finds the first file holding it.

    Positions follow key order; for an lmdbloader corpus position i is record i.
    ``rss_budget`` (int bytes or a string like "256MiB"; None: the
    LMDBLOADER_RSS_BUDGET environment variable, else unbounded) caps the memory
    this reader makes its process hold because of the data file, as the kernel
    counts it. ``mode``: "auto"/"pread" (nothing of the file stays mapped) or
    "mmap" (zero-copy :meth:`view`, governed by the kernel's RSS count).
    ``lock=False`` opens without LMDB's lock file: correct only while no writer
    changes the database. ``db`` names a named database. ``index_dir``: where
    the record index is saved ("none": never; None: loaded beside the data
    or from the cache directory, saved only to the cache directory, never
    into the data's directory; docs/NOTES.md, "Caveats", the record index). ``verify_checksums``: corpora
    written by lmdbloader carry a checksum per record, checked on every read
    (CorruptedError naming the record and file on a mismatch); False skips
    the check (docs/MEASURED.md, for what it costs); "once" checks each
    record the first time it is read, here or in a process forked from here
    (DataLoader workers), and trusts the page cache for later reads: later
    epochs skip the hash, and a record changed on the device after it was
    checked goes unnoticed.

    Batches (:meth:`get_batch`, :meth:`decode_batch`, a DataLoader's
    ``__getitems__``) are read with all their reads in flight at once, GIL
    released: ``io_engine`` "auto" (io_uring, else a pool of pread threads
    when the kernel or a sandbox refuses io_uring), "io_uring", "threads" or
    "sync"; at most ``queue_depth`` reads in flight. ``cache`` says what reads
    leave in the page cache: "fill" reads each 2 MiB chunk whole on first
    touch, so a cold epoch reads large requests and later epochs read large
    folios; "exact" only the records' bytes; "drop" drops what was read
    (corpora bigger than RAM); "auto" fills when the data fits in half the
    memory available. :meth:`stats` reports what was chosen (docs/NOTES.md, "Cold
    reads and the page cache").

    A Reader pickles its configuration, never its handles, and reopens lazily
    in a new process; after ``fork()`` it reopens its own handles on first
    use. Reads are safe from many threads and release the GIL.
    """

    def __init__(self, path, **options):
        # The options' names, defaults and checks are the core's
        # (lmdbloader._core.reader_options()); see the docstring above.
        self._config = dict(
            # Kept as str (bytes a file system name may hold decode with
            # surrogateescape, as os.fsdecode does) and handed to the core as
            # the file system's own bytes.
            path=_path_text(path),
            options=reader_option_texts(options))
        self._path = self._config["path"]
        self._core = None
        self._columns = {}
        self._share = None  # expect_share's arguments, for a process that reopens
        self._open()
        self._rss_budget = int(self._core.option("rss_budget"))

    def _open(self):
        path = self._config["path"]
        if isinstance(path, list):
            self._core = _core.Reader([os.fsencode(p) for p in path], self._config["options"])
        else:
            self._core = _core.Reader(os.fsencode(path), self._config["options"])
        if self._share is not None:  # a spawned worker reads the share its loader was told
            self._core.expect_share(*self._share)
        return self._core

    @property
    def _c(self):
        core = self._core
        if core is None:
            if self._config is None:
                raise ValueError("I/O operation on a closed lmdbloader.Reader")
            core = self._open()
        return core

    # Pickling carries the configuration only; the new process opens lazily.
    def __getstate__(self):
        if self._config is None:
            raise ValueError("cannot pickle a closed lmdbloader.Reader")
        return {"config": self._config, "rss_budget": self._rss_budget, "share": self._share}

    def __setstate__(self, state):
        self._config = state["config"]
        self._path = self._config["path"]
        self._rss_budget = state["rss_budget"]
        self._share = state.get("share")
        self._core = None
        self._columns = {}

    def close(self):
        """Releases handles and mappings; further use raises ValueError."""
        self._core = None
        self._columns = {}
        self._config = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        if self._config is None:
            return "<lmdbloader.Reader closed>"
        return f"<lmdbloader.Reader {self._config['path']!r} records={len(self)} mode={self._c.mode}>"

    @property
    def path(self):
        """The path given to open (still readable after close())."""
        return self._path

    @property
    def db_flags(self):
        """LMDB's flags of the database (lmdb.h: MDB_DUPSORT 0x04, MDB_INTEGERKEY 0x08, ...).
        With MDB_DUPSORT, positions run over (key, duplicate) pairs."""
        return self._c.db_flags

    @property
    def rss_budget(self):
        """The budget in bytes (0: unbounded); still readable after close()."""
        return self._rss_budget

    def __len__(self):
        return len(self._c)

    def __getitem__(self, index):
        """Record bytes at a position (negative counts from the end), or a list
        of them for a slice (read in one call, as get_batch); IndexError past
        the end."""
        if isinstance(index, slice):
            return self.get_batch(range(*index.indices(len(self))))
        return self._c.read(index)  # any integer (numpy's too); IndexError naming the file

    def get(self, key, default=None):
        """Value of ``key`` (bytes), or ``default`` when absent."""
        pos = self._c.find(_as_key(key))
        return default if pos is None else self._c.read(pos)

    def get_batch(self, indices):
        """Records at many positions, read in one call with the GIL released."""
        return self._c.read_batch(list(indices))

    def apply_batch(self, indices, fn, *, views=False):
        """``[fn(self[i]) for i in indices]``, read in cache-sized chunks with
        every read of a chunk in flight together, each record's bytes dropped
        as soon as ``fn`` returns: a batch of large records is never held
        whole, which spares the allocator returning it to the kernel and the
        pages faulting in again for the next batch.

        ``views=True`` (mode="mmap") hands ``fn`` a zero-copy read-only
        memoryview of each record instead of bytes (as :meth:`view`): no copy
        is made, checksums are checked in place."""
        if not callable(fn):
            raise TypeError("fn must be callable")
        if views:
            if self._c.mode != "mmap":
                raise ValueError(f"apply_batch(views=True) needs mode='mmap'; {self.path} was opened in pread mode")
            return self._c.apply_batch_views(list(indices), fn)
        return self._c.apply_batch(list(indices), fn)

    def decode(self, index):
        """Record at ``index`` decoded from msgpack in C++ (maps, lists, bytes, numbers, str)."""
        return self._c.decode(index)

    def decode_batch(self, indices, transform=None):
        """Records at many positions, decoded as :meth:`decode` does. ``transform``
        (a callable) is applied to each record as soon as it is decoded, which
        keeps a batch's memory to one decoded record at a time."""
        if transform is not None and not callable(transform):
            raise TypeError("transform must be callable")
        return self._c.decode_batch(list(indices), transform)

    def view(self, index):
        """Zero-copy read-only memoryview of a record (mode="mmap"). It stays valid
        after remaps and close(): it keeps its mapping alive. Should the file
        shrink while the view is held, its missing pages read as zeros (where
        a plain mapping would kill the process with SIGBUS) and the Reader's
        next read raises OSError."""
        return memoryview(self._c.view(index))

    def value_size(self, index):
        return self._c.value_size(index)

    def value_sizes(self, indices):
        """Sizes in bytes of the records at ``indices`` (a list of ints), as
        :meth:`read_into` needs them; IndexError naming the file for a
        position out of range."""
        return self._c.value_sizes(indices)

    def read_into(self, indices, out, offsets=None):
        """Reads the records at ``indices`` into memory the caller owns, in one
        batch with every read in flight together, the GIL released and each
        checksum checked in place; no bytes object is made.

        With ``offsets`` None, ``out`` is a list of writable buffers, one a
        record, each exactly its record's size (:meth:`value_sizes`). Else
        ``out`` is one writable buffer (a tensor's memory, a ring of shared
        memory) and record ``indices[k]`` goes to ``offsets[k]`` in it.
        ValueError, before anything is read, when a buffer's size disagrees or
        a record does not fit."""
        self._c.read_batch_into(indices, out, offsets)

    def check_mappings(self):
        """OSError when the file shrank under this reader's mappings: a
        :meth:`view` read meanwhile saw zeros where the file's bytes were.
        Call it after handing a view to code that reads it (mode="mmap")."""
        self._c.check_mappings()

    def option(self, name):
        """Option ``name``'s value as this reader holds it, in the text form
        the core's option list (``_core.reader_options()``) and the command
        line use ("64MiB" given is "67108864"); "" for a name
        the list does not have."""
        return self._c.option(name)

    def where(self, index):
        """How messages name the record at ``index`` (negative counts from the
        end): ``"record 5 of /data/train.lmdb"``; in a set of files, the file
        too: ``"record 35 of MJ (record 5 of MJ/MJ_valid)"``."""
        position = int(index)
        position += len(self) if position < 0 else 0
        files = self.files
        for path, first, records in files:
            if first <= position < first + records and len(files) > 1:
                return f"record {position} of {self.path} (record {position - first} of {path})"
        return f"record {position} of {self.path}"

    @property
    def files(self):
        """A set of files (a folder, a glob, a list): its databases in the
        order read, as (path, first position, records) tuples; files left
        out by ``skip_bad_files`` are not among them. () for one database or
        a shard set."""
        return tuple((os.fsdecode(path), first, records) for path, first, records in self._c.file_set_members())

    def key(self, index):
        return self._c.key(index)

    def index_of(self, key, file=None):
        """Position of ``key``; KeyError when absent. In a set of files,
        ``key`` is looked for in the first file holding it, or with ``file``
        (an index into :attr:`files`) in that file alone: keys that every
        file holds, as each OCR set's ``num-samples``."""
        if file is None:
            pos = self._c.find(_as_key(key))
        else:
            pos = self._c.find_in_member(_file_number(file, len(self.files)), _as_key(key))
        if pos is None:
            raise KeyError(key)
        return pos

    def lower_bound(self, key):
        """First position whose key is >= ``key`` (len(self) when none)."""
        return self._c.lower_bound(_as_key(key))

    def keys(self):
        """A lazy sequence of the keys (bytes); no list is built."""
        return _Keys(self)

    def remap(self):
        self._c.remap()

    def expect_share(self, share, in_chunks=False):
        """What this machine reads of the records in an epoch: ``share`` of
        them (0 to 1: this process and those sharing its page cache), or whole
        2 MiB chunks of them (``in_chunks``, as :class:`LocalitySampler`
        reads). With ``cache="auto"`` on a network file system, a share of at
        least 1/2 or reads in chunks read each 2 MiB chunk whole ("fill"),
        else exactly the records; elsewhere nothing changes.
        :class:`lmdbloader.DataLoader` calls it from its sampler. Call it
        between batches, before workers start; workers started by spawn or
        forkserver are told it too."""
        told = (float(share), bool(in_chunks))
        self._c.expect_share(*told)
        self._share = told

    def stats(self):
        """Budget, what the kernel counts for this process, drops, remaps, bytes read."""
        return self._c.stats()

    # Corpus metadata --------------------------------------------------------

    @property
    def manifest(self):
        """The corpus manifest as a dict (None for a plain LMDB)."""
        text = self._c.manifest  # checked by the core: a JSON object with a valid format
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError as e:
            raise CorruptedError(f"corpus {self._path}: the manifest is not valid JSON ({e})") from None

    def name(self, index):
        """Name of record ``index``: str, or bytes in a corpus keyed by names
        (converted from an LMDB: the record's original key)."""
        return self._c.name(index)

    @property
    def keyed_by_names(self):
        """True for a corpus whose keys are its names (``convert --from lmdb``):
        ``get(original_key)`` finds the record."""
        return self._c.keyed_by_names

    def record_positions(self):
        """Where each record lies in its file(s), as a numpy uint64 array: nearby
        values mean records that share pages and 2 MiB chunks (used by
        :class:`lmdbloader.LocalitySampler`)."""
        return np.frombuffer(self._c.record_positions(), dtype=np.uint64)

    def column(self, name):
        """A metadata column as a read-only numpy array, loaded once per process.

        The values sit in one immutable buffer that reading never writes (unlike
        a list of Python ints, whose reference counts are written on every
        read), so DataLoader workers forked after the first call share its
        pages with the parent and copy nothing. KeyError when absent.
        """
        arr = self._columns.get(name)
        if arr is None:
            # The core parsed and checked the dtype (<i8 or <f8) and the size (8 bytes a record).
            dtype = np.dtype(self._c.column_chunks(name)[0][3])
            arr = np.frombuffer(self._c.read_column(name), dtype=dtype)
            self._columns[name] = arr
        return arr


def _file_number(file, count):
    if isinstance(file, bool) or not isinstance(file, numbers.Integral):
        raise TypeError(f"file must be an int (an index into Reader.files); got {file!r}")
    if not 0 <= file < count:
        raise IndexError(f"file {file} out of range: {count} files")
    return int(file)


def _as_key(key):
    if isinstance(key, str):
        return key.encode("utf-8")
    if isinstance(key, (bytes, bytearray, memoryview)):
        return bytes(key)
    raise TypeError(f"keys must be bytes or str, not {type(key).__name__}")


class _Keys:
    """Sequence view of a Reader's keys."""

    def __init__(self, reader):
        self._reader = reader

    def __len__(self):
        return len(self._reader)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._reader.key(k) for k in range(*i.indices(len(self)))]
        return self._reader.key(i)

    def __iter__(self):
        for i in range(len(self._reader)):
            yield self._reader.key(i)

    def __contains__(self, key):
        return self._reader._c.find(_as_key(key)) is not None  # a miss raises nothing
