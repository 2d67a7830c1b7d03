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
    """

    def __init__(self, path, *, overwrite=False, manifest=None):
        self._w = _core.CorpusWriter(os.fspath(path), bool(overwrite))
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
