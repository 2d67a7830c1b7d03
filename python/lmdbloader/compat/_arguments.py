"""How py-lmdb parses its arguments (numbers, flags, keys, buffers, db= and txn=), and its
answers to write calls on a read-only environment."""

import operator

from .. import _core
from ..errors import Error, ReadonlyError
from ._handles import Database, state_of
from ._messages import BAD_VALSIZE
from .errors import BadValsizeError

INT_MAX = (1 << 31) - 1


SIZE_MAX = (1 << 64) - 1


# liblmdb maps map_size bytes: from 2^47 (the x86-64 user address space) up,
# mmap fails with ENOMEM, which py-lmdb raises as MemoryError.
MAPPABLE = 1 << 47


def uint_arg(value, limit, default):
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


def flag_arg(value, default):
    """A boolean argument as py-lmdb parses one: None keeps the default."""
    return default if value is None else bool(value)


# The LMDB releases whose data formats lmdbloader reads, by major version, as
# py-lmdb 3 names its two engines: liblmdb's own (0.9) and the LMDB 1.0 that
# py-lmdb 3.0 bundles (1.0.2), whose files lmdbloader's page reader reads.
LMDB_1_0 = (1, 0, 2)


def engine_version(lib_version):
    """(major, minor, patch) of engine ``lib_version`` (0 or 1)."""
    return LMDB_1_0 if lib_version == 1 else tuple(_core.lmdb_version())


def check_engine(lib_version):
    """py-lmdb 3's check of ``lib_version=``: None (either format, as the
    file has it), or 0 or 1, the major version of an engine there is."""
    if lib_version is None:
        return
    if lib_version < 0:
        raise OverflowError("Integer argument must be >= 0")
    if lib_version not in (_core.lmdb_version()[0], LMDB_1_0[0]):
        raise Error(f"lib_version={lib_version}: this build has no LMDB {lib_version}.x engine.")


def refuse_write(call):
    raise ReadonlyError(f"{call}: Permission denied")


def write_call(call):
    """A method of py-lmdb's write API on the environment: ReadonlyError, as
    py-lmdb on a read-only environment (after its check for a closed one)."""
    def refuse(self, *args, **kwargs):
        state_of(self).check()
        refuse_write(call)
    refuse.__name__ = call
    return refuse


def _type_name(obj):
    """The name CPython's own messages give obj's type (its tp_name)."""
    t = type(obj)
    if t.__module__ == "builtins" or t.__flags__ & (1 << 9):  # Py_TPFLAGS_HEAPTYPE
        return t.__name__
    return f"{t.__module__}.{t.__qualname__}"


def as_bytes(obj):
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


def as_optional_bytes(obj):
    """A buffer argument py-lmdb parses with its argument table, where None
    means "not given": an empty key or value."""
    return b"" if obj is None else as_bytes(obj)


def as_key(key, call, allow_empty=False):
    """py-lmdb's checks of a key argument."""
    key = as_bytes(key)
    if not key and not allow_empty:
        raise BadValsizeError(f"{call}: {BAD_VALSIZE}")
    return key


def db_arg(env, db, default):
    """A ``db=`` argument, checked as py-lmdb checks it: None means the
    default; anything but a database handle of this environment is refused."""
    if db is None:
        return default
    if not isinstance(db, Database):
        raise TypeError("invalid type")
    if db.env is not env:
        raise Error("Database handle belongs to another environment.")
    return db
