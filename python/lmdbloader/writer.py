"""lmdbloader.CorpusWriter: write a corpus record by record from Python."""

import json
import os

import msgpack

from . import _core


class CorpusWriter:
    """Writes a corpus at ``path`` (under a temporary name until :meth:`close`
    renames it into place; an exception inside ``with`` leaves nothing).

    ``add(name, record, **columns)``: ``record`` is bytes stored as given, or
    a dict packed with msgpack; numeric keyword arguments become columns
    (``label=3``), read back with ``Reader.column("label")``.

    ``keys``: "numbers" (default: ``Reader.get`` takes record numbers, names
    are text) or "names" (names are bytes, any bytes, and ``Reader.get(name)``
    and compat's ``txn.get(name)`` find the record: what ``convert --from
    lmdb`` writes, keeping an LMDB's keys).
    """

    def __init__(self, path, *, overwrite=False, manifest=None, keys="numbers"):
        if keys not in ("numbers", "names"):
            raise ValueError(f"keys must be 'numbers' or 'names'; got {keys!r}")
        self._w = _core.CorpusWriter(os.fspath(path), bool(overwrite), keys == "names")
        self._manifest = dict(manifest or {})

    def add(self, name, record, **columns):
        if isinstance(record, dict):
            record = msgpack.packb(record, use_bin_type=True)
        self._w.add(name, record, {k: float(v) for k, v in columns.items()})

    def __len__(self):
        return len(self._w)

    def close(self):
        self._w.finish(json.dumps(self._manifest))

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None:
            self.close()
        self._w = None
        return False
