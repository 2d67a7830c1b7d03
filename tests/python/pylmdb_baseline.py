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
