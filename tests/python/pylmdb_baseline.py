"""The approach lmdbloader replaces, as training code usually writes it: py-lmdb
opened lazily in each DataLoader worker, one read transaction per record. The
baseline for the budget tests and for the benches (bench/dataloader_bench.py,
bench/cold_bench.py, bench/image_bench.py)."""

import json
import struct

import msgpack


class PyLmdbRecords:
    """Map-style dataset: ``ds[i]`` is ``self.value(i, txn.get(self.key(i)))``
    with py-lmdb, the environment opened on the first read in each process
    (a worker's own, never the parent's) with ``OPEN``, one read transaction
    a record. Subclasses say how a position becomes a key and a value."""

    OPEN = {"readonly": True, "lock": False, "readahead": False, "meminit": False}

    def __init__(self, path, length):
        self.path, self.length, self.env = path, length, None

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        if self.env is None:
            import lmdb
            self.env = lmdb.open(self.path, **self.OPEN)
        with self.env.begin() as txn:
            return self.value(i, txn.get(self.key(i)))

    def key(self, i):
        """A corpus's record number: 8 bytes big-endian."""
        return struct.pack(">Q", i)

    def value(self, i, raw):
        return raw

    def __getstate__(self):
        return dict(self.__dict__, env=None)


class PyLmdbDataset(PyLmdbRecords):
    """Map-style dataset over an lmdbloader corpus read with py-lmdb;
    ``transform`` is applied to each decoded record."""

    def __init__(self, path, transform=None):
        import lmdb
        with lmdb.open(path, readonly=True, lock=False) as env:
            with env.begin() as txn:
                length = json.loads(txn.get(b"__lmdbloader__/manifest"))["records"]
        super().__init__(path, length)
        self.transform = transform

    def value(self, i, raw):
        record = msgpack.unpackb(raw)
        return self.transform(record) if self.transform is not None else record


class PyLmdbKeyedDataset(PyLmdbRecords):
    """Map-style dataset over a plain LMDB whose keys are numbered
    (``key_format % i``, e.g. b"%09d"), read as training code usually reads
    one: py-lmdb opened lazily in each worker with its defaults (readahead
    on), one read transaction per record; ``ds[i]`` is the value's bytes."""

    OPEN = {"readonly": True, "lock": False}

    def __init__(self, path, length, key_format=b"%09d"):
        super().__init__(path, length)
        self.key_format = key_format

    def key(self, i):
        return self.key_format % i
