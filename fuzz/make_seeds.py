"""Writes seed inputs for the libFuzzer harnesses into OUT/<fuzzer>/: small
LMDB files of every kind (py-lmdb and lmdbloader corpora), their saved
indexes, manifests, shard lists, msgpack records and Caffe Datums, and small
JPEGs of every kind behind image_decode_fuzzer's 8 bytes of options."""

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
    # Each in LMDB 0.9's data format and in LMDB 1.0's (py-lmdb 3's lib_version=1).
    specs.update({name + "-lmdb10": dict(spec, lib_version=1) for name, spec in list(specs.items())})
    out = []
    for name, spec in specs.items():
        path = os.path.join(root, name)
        with lmdb.open(path, map_size=1 << 22, max_dbs=2, lib_version=spec.get("lib_version", 0)) as env:
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


def image_seeds(out):
    """JPEGs as Pillow writes them (baseline, progressive, 4:4:4, restart
    markers, gray, CMYK), each behind options bytes (fuzz/image_decode_fuzzer.cc),
    and raw RGB pixels for the resize alone."""
    import io

    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(1)
    y, x = np.mgrid[0:37, 0:53]
    rgb = np.stack([x * 4, y * 6, (x + y) * 3], axis=2) + rng.integers(0, 30, (37, 53, 3))
    img = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8))
    kinds = {
        "baseline": (img, dict(quality=75)),
        "progressive": (img, dict(quality=75, progressive=True)),
        "444": (img, dict(quality=90, subsampling=0)),
        "422": (img, dict(quality=60, subsampling=1)),
        "restart": (img, dict(quality=75, restart_marker_rows=1)),
        "gray": (img.convert("L"), dict(quality=75)),
        "cmyk": (img.convert("CMYK"), dict(quality=75)),
    }
    options = [bytes([0, 23, 17, 10, 20, 200, 180, 0]), bytes([1 | 2 | 4 | 8, 7, 9, 0, 0, 255, 255, 0]),
               bytes([16 | 8, 223, 223, 128, 64, 30, 40, 0])]
    for name, (im, kw) in kinds.items():
        b = io.BytesIO()
        im.save(b, "JPEG", **kw)
        for k, opt in enumerate(options):
            with open(os.path.join(out, f"{name}-{k}"), "wb") as f:
                f.write(opt + b.getvalue())
    # Damage after the scan, where only a box reaching the last row looks
    # (flag 64): a marker in place of the end-of-image marker, none at all.
    b = io.BytesIO()
    img.save(b, "JPEG", quality=75)
    body = b.getvalue()[:-2]
    for k, tail in enumerate([b"\xff\x05", b"\xff\xc4", b"\xff\xc0", b"", b"\x12\x34\xff\xd9"]):
        for m, opt in enumerate([bytes([64 | 8, 31, 31, 0, 0, 255, 255, 0]), bytes([2, 15, 15, 40, 20, 100, 60, 0])]):
            with open(os.path.join(out, f"damaged-end-{k}-{m}"), "wb") as f:
                f.write(opt + body + tail)
    with open(os.path.join(out, "rgb"), "wb") as f:
        f.write(bytes([32 | 4, 30, 20, 5, 5, 200, 200, 52]) + np.asarray(img).tobytes())


def datum_seeds(out):
    """Caffe Datums as convert_imageset writes them (protobuf's wire format:
    encoded images, raw pixels), float_data both ways, an unknown field."""

    def varint(v):
        v &= (1 << 64) - 1  # a negative int32 as protobuf writes it: 10 bytes
        b = bytearray()
        while v >= 0x80:
            b.append(v & 0x7F | 0x80)
            v >>= 7
        return bytes(b) + bytes([v])

    def field(number, value):
        if isinstance(value, bytes):
            return varint(number << 3 | 2) + varint(len(value)) + value
        if isinstance(value, float):
            return varint(number << 3 | 5) + struct.pack("<f", value)
        return varint(number << 3) + varint(value)

    seeds = {
        "encoded": [(4, b"\xff\xd8\xff\xe0 a jpeg"), (5, 7), (7, 1)],
        "raw": [(1, 3), (2, 2), (3, 4), (4, bytes(range(24))), (5, -1), (7, 0)],
        "float": [(1, 1), (2, 1), (3, 2), (6, 1.5), (6, -2.0)],
        "packed": [(1, 2), (2, 1), (3, 1), (6, struct.pack("<2f", 1, 2))],
        "unknown": [(9, 5), (4, b"img"), (12, b"extra"), (7, 1)],
    }
    for name, fields in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(b"".join(field(n, v) for n, v in fields))


def harnesses():
    """The harness names, from fuzz/harnesses.txt (the list CMake builds)."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "harnesses.txt")) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def main(out):
    work = os.path.join(out, "work")
    os.makedirs(work, exist_ok=True)
    dirs = {k: os.path.join(out, k) for k in harnesses()}
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
                g.write(f.read())  # whole: the harness parses it with its sums skipped
    # A file set's saved listing: a list of two of the databases above.
    members = [os.path.join(work, "small"), os.path.join(work, "overflow")]
    listing_dir = os.path.join(work, "listing")
    lmdbloader.Reader(members, index_dir=listing_dir)  # saves the listing there
    for name in os.listdir(listing_dir):
        if name.endswith(".lst"):
            with open(os.path.join(listing_dir, name), "rb") as f, \
                    open(os.path.join(dirs["set_listing"], "two"), "wb") as g:
                g.write(f.read())
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
    datum_seeds(dirs["caffe_datum"])
    datum_seeds(dirs["image_record"])
    for i, record in enumerate([{"image": b"\xff\xd8\xff", "label": 3}, [b"\xff\xd8", b"\xff\xd8\xff"],
                                {"frames": [b"a", b"b"], "label": "run"},
                                {"pixels": b"abcdef", "channels": 1, "height": 2, "width": 3, "label": 0}]):
        with open(os.path.join(dirs["image_record"], f"msgpack-{i}"), "wb") as f:
            f.write(msgpack.packb(record))
    image_seeds(dirs["image_decode"])


if __name__ == "__main__":
    main(sys.argv[1])
