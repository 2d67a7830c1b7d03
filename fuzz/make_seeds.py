"""Writes seed inputs for the libFuzzer harnesses into OUT/<fuzzer>/: small
LMDB files of every kind (py-lmdb and lmdbloader corpora), their saved
indexes, manifests, shard lists and msgpack records."""

import json
import os
import struct
import sys

import lmdb
import msgpack

import lmdbloader


def lmdb_files(root):
    """(name, path of data.mdb) for small databases of every kind."""
    specs = {
        "small": dict(records=[(b"k%03d" % i, b"v" * (i % 50)) for i in range(200)]),
        "overflow": dict(records=[(b"k%d" % i, bytes([i]) * 5000) for i in range(6)]),
        "integerkey": dict(records=[(struct.pack("=I", i * 7), b"x") for i in range(100)], integerkey=True),
        "dupsort": dict(records=[(b"k%d" % (i % 5), b"d%03d" % i) for i in range(120)], dupsort=True),
        "dupfixed": dict(records=[(b"k%d" % (i % 3), struct.pack("=Q", i)) for i in range(600)],
                         dupsort=True, dupfixed=True, integerdup=True),
        "named": dict(records=[(b"n%d" % i, b"y" * i) for i in range(40)], db=b"named"),
    }
    out = []
    for name, spec in specs.items():
        path = os.path.join(root, name)
        with lmdb.open(path, map_size=1 << 22, max_dbs=2) as env:
            flags = {k: spec[k] for k in ("integerkey", "dupsort", "dupfixed", "integerdup") if k in spec}
            # Flags live on named databases ("named": the one the harness walks).
            db = env.open_db(b"named", **flags) if (flags or spec.get("db")) else None
            with env.begin(write=True, db=db) as txn:
                for k, v in spec["records"]:
                    txn.put(k, v, db=db)
        out.append((name, os.path.join(path, "data.mdb")))
    corpus = os.path.join(root, "corpus")
    with lmdbloader.CorpusWriter(corpus) as w:
        for i in range(30):
            w.add(f"r{i}", {"image": bytes([i]) * (100 + 300 * i), "label": i % 3}, label=i % 3)
    out.append(("corpus", os.path.join(corpus, "data.mdb")))
    return out


def main(out):
    work = os.path.join(out, "work")
    os.makedirs(work, exist_ok=True)
    dirs = {k: os.path.join(out, k) for k in ("lmdb_pages", "index_file", "manifest", "shard_list",
                                              "msgpack_record")}
    for d in dirs.values():
        os.makedirs(d, exist_ok=True)
    for name, data in lmdb_files(work):
        with open(data, "rb") as f, open(os.path.join(dirs["lmdb_pages"], name), "wb") as g:
            g.write(f.read())
        index_dir = os.path.join(work, "index-" + name)
        lmdbloader.Reader(os.path.dirname(data), index_dir=index_dir)  # saves the index there
        for idx in os.listdir(index_dir):
            with open(os.path.join(index_dir, idx), "rb") as f, \
                    open(os.path.join(dirs["index_file"], name), "wb") as g:
                g.write(f.read()[:-8])  # the harness appends the checksum
    corpus = lmdbloader.Reader(os.path.join(work, "corpus"))
    with open(os.path.join(dirs["manifest"], "corpus"), "w") as f:
        json.dump(corpus.manifest, f)
    with open(os.path.join(dirs["shard_list"], "two"), "w") as f:
        json.dump({"format": "lmdbloader-shards", "version": 1, "records": 3,
                   "shards": [{"path": "part-00000-of-00002", "records": 1},
                              {"path": "part-00001-of-00002", "records": 2}]}, f)
    for i, record in enumerate([{"image": b"x" * 10, "label": 3, "name": "a/b"},
                                {"frames": [b"1", b"22"], "label": -1, "name": "v"},
                                [1, 2.5, None, True, {"k": "ü"}]]):
        with open(os.path.join(dirs["msgpack_record"], str(i)), "wb") as f:
            f.write(msgpack.packb(record))


if __name__ == "__main__":
    main(sys.argv[1])
