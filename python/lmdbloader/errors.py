"""Exceptions raised by lmdbloader.

Python's own exception types are used where they fit: ``KeyError`` (a key that
is absent, where the API says so), ``IndexError`` (a position past the end),
``ValueError`` (bad option values), ``TypeError`` (unknown keyword arguments),
``OSError`` (a failed system call; the message names the file). Failures that
only LMDB files have raise a subclass of :class:`Error`.
"""


class Error(Exception):
    """Base class of lmdbloader's own errors (also ``lmdbloader.compat.Error``)."""


class CorruptedError(Error):
    """Not an LMDB file, truncated, damaged, or changed under a saved index."""


class UnsupportedError(Error):
    """A valid LMDB feature lmdbloader does not read (for example MDB_DUPSORT)."""


class DecodeError(Error, ValueError):
    """A record that does not decode (names the file and the record)."""


class ReadonlyError(Error):
    """A write was requested through the read-only compat API."""


class ConvertError(Error, ValueError):
    """Bad input to the converter (names the file or line)."""
