"""py-lmdb's exception classes, every one an lmdbloader.compat.Error."""

from ..errors import Error


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
