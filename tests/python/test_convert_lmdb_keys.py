"""convert --from lmdb keeps every key exactly: py-lmdb writes databases whose
keys are bytes of every kind (packed integers, hashes, NUL bytes, text,
MDB_INTEGERKEY, named databases); each is converted, and every original key
returns its original value through Reader.get and compat's txn.get, as
py-lmdb's txn.get returns it from the source. A corpus converts again to an
equal corpus."""

import hashlib
import json
import os
import struct
import subprocess

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lmdbloader
import lmdbloader.compat

lmdb = pytest.importorskip("lmdb")

# How a key of record number i is made, for each kind of key users write.
KEY_KINDS = {
    ">Q": lambda i: struct.pack(">Q", i),
    "<Q": lambda i: struct.pack("<Q", i),
    ">I": lambda i: struct.pack(">I", i),
    "<I": lambda i: struct.pack("<I", i),
    ">H": lambda i: struct.pack(">H", i),
    "sha1": lambda i: hashlib.sha1(b"%d" % i).digest(),
    "sha256": lambda i: hashlib.sha256(b"%d" % i).digest(),
    "nul": lambda i: b"\x00" * (i % 3) + b"k\x00%d\x00" % i,
    "ascii": lambda i: b"img_%08d.jpg" % i,
    "utf8": lambda i: "клип-%d-é".encode() % i,
    "long": lambda i: hashlib.sha512(b"%d" % i).digest() * 7 + b"%d" % i,  # 448+ bytes, near LMDB's 511
}


def source_values(path, db):
    """Every (key, value) of the source, read by py-lmdb itself."""
    with lmdb.open(path, readonly=True, lock=False, max_dbs=2) as env:
        handle = env.open_db(db.encode(), create=False) if db else None
        with env.begin(db=handle) as txn:
            return list(txn.cursor())


def write_source(path, kind, ids, sizes, db=None, integerkey=False, lib_version=0):
    with lmdb.open(path, map_size=1 << 28, max_dbs=2, lib_version=lib_version) as env:
        handle = env.open_db(db.encode(), integerkey=integerkey) if db else None
        with env.begin(write=True, db=handle) as txn:
            for i, size in zip(ids, sizes):
                key = struct.pack("=Q" if size % 2 else "=I", i) if integerkey else KEY_KINDS[kind](i)
                txn.put(key, os.urandom(size))
    return source_values(path, db)


def assert_reads_as_source(out, pairs, *, compat=True):
    r = lmdbloader.Reader(out)
    assert len(r) == len(pairs) and r.keyed_by_names
    for key, value in pairs:
        assert r.get(key) == value, f"Reader.get({key!r}) of {out}"
    assert r.get(b"\xff" * 40 + b"absent") is None
    assert sorted(r.name(i) for i in range(len(r))) == sorted(k for k, _ in pairs)
    if compat:
        with lmdbloader.compat.open(out, readonly=True, lock=False) as env, env.begin() as txn:
            for key, value in pairs:
                assert txn.get(key) == value, f"compat txn.get({key!r}) of {out}"
            assert txn.get(b"\xff" * 40 + b"absent") is None
            cursor = txn.cursor()
            key, value = pairs[len(pairs) // 2]
            assert cursor.set_key(key) and cursor.value() == value


def corpus_contents(path):
    """What makes two corpora equal: records, names, columns and the manifest
    but for where it was converted from."""
    r = lmdbloader.Reader(path)
    # A shard set's manifest is its first part's: its own count and place.
    manifest = {k: v for k, v in r.manifest.items() if k not in ("source", "checksums", "records", "shard")}
    columns = {c: r.column(c).tolist() for c in manifest.get("columns", {})}
    return [r[i] for i in range(len(r))], [r.name(i) for i in range(len(r))], columns, manifest


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(sorted(KEY_KINDS) + ["integerkey"]),
       count=st.integers(1, 150),
       spread=st.integers(1, 1000),
       big=st.booleans(),
       db=st.sampled_from([None, "named"]),
       order=st.sampled_from(["sorted", "given", "shuffle"]),
       shards=st.sampled_from([1, 1, 3]))
def test_every_original_key_returns_its_value(tmp_path_factory, kind, count, spread, big, db, order, shards):
    tmp = tmp_path_factory.mktemp("keys")
    src = str(tmp / "src")
    if kind == ">H":
        spread = min(spread, 65535 // count)  # every id must fit the 2-byte key
    ids = [i * spread for i in range(count)]  # sparse ids: a record number is never the key
    sizes = [(i * 977) % (9000 if big else 600) for i in range(count)]  # some values on overflow pages
    if kind == "integerkey":
        db = "named"  # LMDB sets no flags on the main database
    pairs = write_source(src, kind, ids, sizes, db=db, integerkey=kind == "integerkey")
    out = str(tmp / "out")
    lmdbloader.convert(src, out, kind="lmdb", db=db, order=order, num_shards=min(shards, count))
    assert_reads_as_source(out, pairs, compat=shards == 1)
    # Converted again, the corpus is equal to itself.
    again = str(tmp / "again")
    lmdbloader.convert(out, again, kind="lmdb", order="given")
    assert corpus_contents(again) == corpus_contents(out)


@pytest.mark.parametrize("lib_version", [0, 1])
def test_packed_integer_keys_through_the_command(tmp_path, lib_version):
    """The case users met: struct.pack(">Q", i) keys, refused at the 129th
    record when names had to be text; the command converts, gets by key,
    verifies, and converts the corpus onto itself. The source in LMDB 0.9's
    format and in LMDB 1.0's, which verify reads too."""
    src, out = str(tmp_path / "src"), str(tmp_path / "out")
    pairs = write_source(src, ">Q", range(0, 3000, 7), [100 + i % 3000 for i in range(429)], lib_version=lib_version)
    res = subprocess.run(["lmdbloader", "verify", src], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    res = subprocess.run(["lmdbloader", "convert", "--from", "lmdb", src, out], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert_reads_as_source(out, pairs)
    key, value = pairs[200]
    got = subprocess.run(["lmdbloader", "get", out, "--key-hex", key.hex()], capture_output=True)
    assert got.returncode == 0 and got.stdout == value, got.stderr
    res = subprocess.run(["lmdbloader", "verify", out], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    before = corpus_contents(out)
    res = subprocess.run(["lmdbloader", "convert", "--from", "lmdb", out, out, "--overwrite"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert corpus_contents(out) == before
    assert_reads_as_source(out, pairs)


def test_a_folder_corpus_converts_again_to_an_equal_corpus(tmp_path):
    """Names stay text, keys stay record numbers, the label column and label
    names carry over."""
    for cls in ("cat", "dog"):
        os.makedirs(tmp_path / "src" / cls)
        for i in range(4):
            (tmp_path / "src" / cls / f"{i}.jpg").write_bytes(os.urandom(300 + i))
    first, second = str(tmp_path / "first"), str(tmp_path / "second")
    lmdbloader.convert(tmp_path / "src", first, kind="image_folder")
    lmdbloader.convert(first, second, kind="lmdb")
    assert corpus_contents(second) == corpus_contents(first)
    r = lmdbloader.Reader(second)
    assert not r.keyed_by_names and r.name(5) == "dog/1.jpg"
    assert r.get(struct.pack(">Q", 5)) == r[5] and msgpack.unpackb(r[5])["label"] == 1
    assert r.manifest["label_names"] == ["cat", "dog"]


def test_a_corpus_keyed_by_names_is_refused_by_an_older_format_reader_only_for_unknown_keys(tmp_path):
    """A later format's "keys" is named, not misread as record numbers."""
    src, out = str(tmp_path / "src"), str(tmp_path / "out")
    write_source(src, "sha1", range(10), [10] * 10)
    lmdbloader.convert(src, out, kind="lmdb")
    with lmdb.open(out, map_size=1 << 26) as env, env.begin(write=True) as txn:
        manifest = json.loads(txn.get(b"__lmdbloader__/manifest"))
        manifest["keys"] = "hashes"
        txn.put(b"__lmdbloader__/manifest", json.dumps(manifest).encode())
        txn.delete(b"__lmdbloader__/manifest.xxh3")
    with pytest.raises(lmdbloader.UnsupportedError, match="keyed by 'hashes'"):
        lmdbloader.Reader(out, index_dir="none")
