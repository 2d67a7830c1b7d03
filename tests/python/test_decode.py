"""Records decoded in C++ equal what msgpack-python decodes, one at a time and
in batches (read and decoded in cache-sized chunks, transform per record)."""

import struct
import sys

import lmdb
import msgpack
import pytest

import lmdbloader

RECORDS = [
    None, True, False, 0, 127, -1, -33, 2**63 - 1, -(2**63), 2**64 - 1, 1.5, -0.25,
    "", "ascii", "ünïcødé ✓", b"", b"\x00\xff" * 10,
    [], [1, [2, [3, None]]], {}, {"a": 1, "b": [b"x", "y"], 7: {"nested": True}},
    {"frames": [bytes([i]) * 70_000 for i in range(5)], "label": 3, "name": "big"},  # > one chunk
    {"frames": [b"z" * 300_000], "label": 4, "name": "bigger than a chunk by itself"},
]


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("decode") / "db")
    with lmdb.open(path, map_size=1 << 26) as env, env.begin(write=True) as txn:
        for i, value in enumerate(RECORDS):
            txn.put(struct.pack(">Q", i), msgpack.packb(value))
        txn.put(struct.pack(">Q", len(RECORDS)), msgpack.packb(struct.unpack("f", b"\x00\x00\xc0\x3f")[0],
                                                               use_single_float=True))
    return path


def expected(path):
    with lmdb.open(path, readonly=True, lock=False) as env, env.begin() as txn:
        return [msgpack.unpackb(v, strict_map_key=False) for _, v in txn.cursor()]


@pytest.mark.parametrize("mode", ["pread", "mmap"])
def test_decode_matches_msgpack_python(db, mode):
    want = expected(db)
    r = lmdbloader.Reader(db, mode=mode)
    assert [r.decode(i) for i in range(len(r))] == want
    assert r.decode_batch(range(len(r))) == want
    assert r.decode_batch([len(r) - 1, 0, -1]) == [want[-1], want[0], want[-1]]
    assert r.decode_batch([]) == []


def test_decode_batch_applies_transform_to_each_record(db):
    want = expected(db)
    r = lmdbloader.Reader(db)
    seen = []

    def transform(record):
        seen.append(record)
        return type(record).__name__

    assert r.decode_batch(range(len(r)), transform) == [type(x).__name__ for x in want]
    assert seen == want
    with pytest.raises(TypeError, match="callable"):
        r.decode_batch([0], transform=42)


def test_transform_that_reads_the_same_reader_leaves_the_batch_intact(db):
    # The transform runs while the batch's read buffer holds records still to
    # be decoded; reading a record larger than that buffer from inside it must
    # not reuse or free it.
    want = expected(db)
    r = lmdbloader.Reader(db)
    biggest = max(range(len(want)), key=lambda i: r.value_size(i))
    small = [i for i in range(len(want)) if r.value_size(i) < 1000]

    def transform(record):
        assert r.decode(biggest) == want[biggest]
        return record

    assert r.decode_batch(small, transform) == [want[i] for i in small]


def test_transform_errors_propagate_unchanged(db):
    r = lmdbloader.Reader(db)

    def fails(record):
        raise RuntimeError("from the transform")

    with pytest.raises(RuntimeError, match="from the transform"):
        r.decode_batch([0, 1], fails)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception notes (PEP 678) need Python 3.11")
@pytest.mark.parametrize("how", ["decode", "views", "transform", "raw+transform"])
def test_a_users_decode_or_transform_error_names_the_record_and_file(db, how):
    """The user's exception goes on unchanged, with a note naming the record
    and file: a DataLoader re-raises a worker's error as text, which would
    otherwise not say where it happened."""
    torch = pytest.importorskip("torch")

    def fails(record):
        raise RuntimeError("the user's bug")

    kw = {"decode": dict(decode=fails), "views": dict(decode=fails, views=True),
          "transform": dict(transform=fails), "raw+transform": dict(decode="raw", transform=fails)}[how]
    ds = lmdbloader.LmdbDataset(db, **kw)
    for call, record in ((lambda: ds[3], 3), (lambda: ds[-1], len(ds) - 1), (lambda: ds.__getitems__([2, 5]), 2)):
        with pytest.raises(RuntimeError, match="the user's bug") as caught:
            call()
        assert caught.value.__notes__ == [f"lmdbloader: raised on record {record} of {db}"]
    loader = torch.utils.data.DataLoader(ds, batch_size=2, num_workers=1)
    with pytest.raises(RuntimeError, match=f"lmdbloader: raised on record 0 of {db}"):
        next(iter(loader))


def test_out_of_range_batch_reads_nothing(db):
    r = lmdbloader.Reader(db)
    calls = []
    with pytest.raises(IndexError, match="index 99 out of range"):
        r.decode_batch([0, 99], calls.append)
    assert calls == []


def test_extension_types_raise_decode_error_naming_record(tmp_path):
    path = str(tmp_path / "ext")
    with lmdb.open(path, map_size=1 << 20) as env, env.begin(write=True) as txn:
        txn.put(b"k", msgpack.packb(msgpack.ExtType(5, b"data")))
    r = lmdbloader.Reader(path)
    with pytest.raises(lmdbloader.DecodeError, match="record 0 of .*ext as msgpack: .*extension types are not supported"):
        r.decode(0)
    with pytest.raises(lmdbloader.DecodeError):
        r.decode_batch([0])


BAD_RECORDS = {
    "nested deeper than 512 levels": b"\x91" * 100_000 + b"\xc0",
    "map key is an array or a map": b"\x81\x91\x01\x02",
    "bytes follow the msgpack value": msgpack.packb({"a": 1}) + b"\x00\x01",
    "array size overflow": b"\xdd\xff\xff\xff\xff",  # array32 claiming 4G elements
}


@pytest.mark.parametrize("what", list(BAD_RECORDS))
def test_malformed_records_raise_decode_error_naming_record_never_crash(tmp_path, what):
    path = str(tmp_path / "bad")
    with lmdb.open(path, map_size=1 << 24) as env, env.begin(write=True) as txn:
        txn.put(b"a", msgpack.packb({"ok": 1}))
        txn.put(b"b", BAD_RECORDS[what])
    r = lmdbloader.Reader(path)
    assert r.decode(0) == {"ok": 1}
    with pytest.raises(lmdbloader.DecodeError, match=f"record 1 of .*bad as msgpack: .*({what})"):
        r.decode(1)
    with pytest.raises(lmdbloader.DecodeError, match="record 1 of"):
        r.decode_batch([0, 1])
    ds = lmdbloader.LmdbDataset(path)
    with pytest.raises(lmdbloader.DecodeError, match="record 1 of"):
        ds[1]
    with pytest.raises(lmdbloader.DecodeError, match="record 1 of"):
        ds.__getitems__([1, 0])
