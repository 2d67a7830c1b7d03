"""The approach lmdbloader replaces, as training code usually writes it: py-lmdb
opened lazily in each DataLoader worker, one read transaction per record. The
baseline for the budget tests and for bench/dataloader_bench.py."""

import json
import struct

import msgpack


class PyLmdbDataset:
    """Map-style dataset over an lmdbloader corpus read with py-lmdb;
    ``transform`` is applied to each decoded record."""

    def __init__(self, path, transform=None):
        import lmdb
        self.path, self.transform, self.env = path, transform, None
        with lmdb.open(path, readonly=True, lock=False) as env:
            with env.begin() as txn:
                self.length = json.loads(txn.get(b"__lmdbloader__/manifest"))["records"]

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        import lmdb
        if self.env is None:
            self.env = lmdb.open(self.path, readonly=True, lock=False, readahead=False, meminit=False)
        with self.env.begin() as txn:
            record = msgpack.unpackb(txn.get(struct.pack(">Q", i)))
        return self.transform(record) if self.transform is not None else record


class PyLmdbKeyedDataset:
    """Map-style dataset over a plain LMDB whose keys are numbered
    (``key_format % i``, e.g. b"%09d"), read as training code usually reads
    one: py-lmdb opened lazily in each worker with its defaults (readahead
    on), one read transaction per record; ``ds[i]`` is the value's bytes."""

    def __init__(self, path, length, key_format=b"%09d"):
        self.path, self.length, self.key_format, self.env = path, length, key_format, None

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        import lmdb
        if self.env is None:
            self.env = lmdb.open(self.path, readonly=True, lock=False)
        with self.env.begin() as txn:
            return txn.get(self.key_format % i)
