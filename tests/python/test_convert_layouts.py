"""convert --from lmdb --record: LMDBs written the way their own tools write
them (Caffe's convert_imageset, CoCLR's convert_video_to_lmdb.py, LSUN-style
encoded images) become corpora whose images or frames and labels are fields,
the labels a column; the Datum parser is reachable from Python; bad records
name their key and file and leave nothing at the output."""

import io
import json
import os
import struct
import subprocess

import msgpack
import numpy as np
import pytest
from PIL import Image

import lmdbloader
from lmdbloader import _core

lmdb = pytest.importorskip("lmdb")


# A Caffe Datum as protobuf serializes one (caffe.proto: channels 1, height 2,
# width 3, data 4, label 5, float_data 6, encoded 7), fields in number order.
def _varint(v):
    v &= (1 << 64) - 1  # a negative int32 is written as its 64-bit two's complement
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    return bytes(out) + bytes([v])


def datum(*, data, label=None, encoded=None, channels=None, height=None, width=None):
    out = b""
    for number, value in ((1, channels), (2, height), (3, width)):
        if value is not None:
            out += _varint(number << 3) + _varint(value)
    out += _varint(4 << 3 | 2) + _varint(len(data)) + data
    if label is not None:
        out += _varint(5 << 3) + _varint(label)
    if encoded is not None:
        out += _varint(7 << 3) + _varint(int(encoded))
    return out


def test_the_datum_encoder_writes_what_protobuf_writes():
    # Bytes that protobuf 7.36's Python runtime serialized for the same Datums.
    assert datum(data=b"\xff\xd8jpeg", label=7, encoded=True).hex() == "2206ffd86a70656728073801"
    assert datum(channels=3, height=2, width=1, data=bytes(range(6)), label=-1, encoded=False).hex() == (
        "080310021801220600010203040528ffffffffffffffffff013800")


def jpeg(seed, size=(40, 30)):
    rng = np.random.default_rng(seed)
    b = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)).save(b, "JPEG", quality=90)
    return b.getvalue()


@pytest.fixture(scope="module")
def caffe_lmdb(tmp_path_factory):
    """convert_imageset's output: keys %08d_<file name>, encoded Datums."""
    path = str(tmp_path_factory.mktemp("caffe") / "train_lmdb")
    images = [(f"{i:08d}_n0144{i}_{i}.JPEG".encode(), jpeg(i), (i * 37) % 1000) for i in range(6)]
    with lmdb.open(path, map_size=1 << 24) as env, env.begin(write=True) as txn:
        for key, image, label in images:
            txn.put(key, datum(data=image, label=label, encoded=True))
    return path, images


def test_a_caffe_lmdb_becomes_images_and_a_label_column(caffe_lmdb, tmp_path):
    src, images = caffe_lmdb
    summary = lmdbloader.convert(src, tmp_path / "out", kind="lmdb", record="caffe")
    assert summary["records"] == len(images) and summary["skipped"] == []
    ds = lmdbloader.LmdbDataset(str(tmp_path / "out"))
    assert ds.column("label").tolist() == [label for _, _, label in images]
    for i, (key, image, label) in enumerate(images):
        assert ds[i] == {"image": image, "label": label}  # the JPEG byte for byte
        assert ds.name(i) == key
    manifest = ds.manifest
    assert manifest["source"]["record"] == "caffe"
    assert manifest["schema"] == {"encoding": "msgpack", "fields": ["image", "label"]}


def test_raw_pixel_datums_keep_their_pixels_as_caffe_stored_them(tmp_path):
    rng = np.random.default_rng(5)
    rgb = rng.integers(0, 255, (4, 5, 3), dtype=np.uint8)
    chw_bgr = np.ascontiguousarray(rgb[:, :, ::-1].transpose(2, 0, 1)).tobytes()  # CVMatToDatum's order
    with lmdb.open(str(tmp_path / "raw"), map_size=1 << 20) as env, env.begin(write=True) as txn:
        txn.put(b"00000000_x.png", datum(channels=3, height=4, width=5, data=chw_bgr, label=9, encoded=False))
    lmdbloader.convert(tmp_path / "raw", tmp_path / "out", kind="lmdb", record="caffe")
    record = lmdbloader.LmdbDataset(str(tmp_path / "out"))[0]
    assert record == {"pixels": chw_bgr, "channels": 3, "height": 4, "width": 5, "label": 9}
    pixels = np.frombuffer(record["pixels"], np.uint8).reshape(3, 4, 5)
    assert np.array_equal(pixels[::-1].transpose(1, 2, 0), rgb)


@pytest.fixture(scope="module")
def coclr_lmdb(tmp_path_factory):
    """CoCLR's UCF101 frame LMDB: one file, a msgpack list of JPEG frames under
    each video's index in ASCII, and its metadata records."""
    path = str(tmp_path_factory.mktemp("coclr") / "ucf101_frame.lmdb")
    videos = {b"%d" % i: [jpeg(100 * i + k, (24, 18)) for k in range(3 + i)] for i in range(12)}
    with lmdb.open(path, subdir=False, map_size=1 << 24, meminit=False, map_async=True) as env:
        with env.begin(write=True) as txn:
            for key, frames in videos.items():
                txn.put(key, msgpack.dumps(frames))
            keys = list(videos)
            txn.put(b"__keys__", msgpack.dumps(keys))
            txn.put(b"__len__", msgpack.dumps(len(keys)))
            txn.put(b"__order__", msgpack.dumps([f"v_{k.decode()}" for k in keys]))
            txn.put(b"__vlen__", msgpack.dumps([len(v) for v in videos.values()]))
    return path, videos


def test_a_coclr_lmdb_becomes_frames_leaving_its_metadata_out(coclr_lmdb, tmp_path):
    src, videos = coclr_lmdb
    out = tmp_path / "out"
    res = subprocess.run(["lmdbloader", "convert", "--from", "lmdb", "--record", "msgpack", src, str(out), "--json"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["records"] == len(videos)
    assert sorted(s.split("(key ")[1].split(")")[0] for s in summary["skipped"]) == [
        "'__keys__'", "'__len__'", "'__order__'", "'__vlen__'"]
    assert all("a metadata record" in s for s in summary["skipped"])
    r = lmdbloader.Reader(str(out))
    assert len(r) == len(videos)
    for key, frames in videos.items():
        assert msgpack.loads(r.get(key)) == {"frames": frames}
    assert r.manifest["schema"]["fields"] == ["frames"]


def test_a_msgpack_map_is_kept_and_an_encoded_image_becomes_a_field(tmp_path):
    with lmdb.open(str(tmp_path / "maps"), map_size=1 << 20) as env, env.begin(write=True) as txn:
        for i in range(3):
            txn.put(b"k%d" % i, msgpack.dumps({"image": jpeg(i), "label": i - 1, "caption": "x"}))
        txn.put(b"__len__", b"3")
    lmdbloader.convert(tmp_path / "maps", tmp_path / "out", kind="lmdb", record="msgpack")
    ds = lmdbloader.LmdbDataset(str(tmp_path / "out"))
    assert ds.column("label").tolist() == [-1, 0, 1]
    assert ds[2] == {"image": jpeg(2), "label": 1, "caption": "x"}
    # LSUN-style: each value the encoded image.
    lmdbloader.convert(tmp_path / "maps", tmp_path / "raw", kind="lmdb", record="raw")
    r = lmdbloader.Reader(str(tmp_path / "raw"))
    assert msgpack.loads(r.get(b"k1")) == {"image": msgpack.dumps({"image": jpeg(1), "label": 0, "caption": "x"})}
    # Without --record, the records and the metadata stay as they were.
    lmdbloader.convert(tmp_path / "maps", tmp_path / "as_is", kind="lmdb")
    assert lmdbloader.Reader(str(tmp_path / "as_is")).get(b"__len__") == b"3"


@pytest.mark.parametrize("bad,words", [
    (datum(data=jpeg(0), label=1, encoded=True)[:40], "not a valid Caffe Datum: data: "),
    (datum(channels=3, height=4, width=5, data=b"p" * 59, label=1, encoded=False),
     "raw pixels: data holds 59 bytes, not channels x height x width = 3 x 4 x 5"),
    (datum(data=b"x", label=1 << 31, encoded=True), "label is 2147483648, outside int32"),
    (msgpack.dumps({"image": b"x"}), "not a valid Caffe Datum"),
])
def test_a_bad_record_names_its_key_and_file_and_leaves_no_output(caffe_lmdb, tmp_path, bad, words):
    src = str(tmp_path / "caffe")
    with lmdb.open(src, map_size=1 << 24) as env, env.begin(write=True) as txn:
        for key, image, label in caffe_lmdb[1][:3]:
            txn.put(key, datum(data=image, label=label, encoded=True))
        txn.put(b"00000003_bad.JPEG", bad)
    with pytest.raises(lmdbloader.ConvertError) as e:
        lmdbloader.convert(src, tmp_path / "out", kind="lmdb", record="caffe")
    assert f"{src} record 3 (key '00000003_bad.JPEG'): " in str(e.value) and words in str(e.value), str(e.value)
    assert not os.path.exists(tmp_path / "out")
    res = subprocess.run(["lmdbloader", "convert", "--from", "lmdb", "--record", "caffe", src, str(tmp_path / "out")],
                         capture_output=True, text=True)
    assert res.returncode == 1 and words in res.stderr and "'00000003_bad.JPEG'" in res.stderr, res.stderr
    assert not os.path.exists(tmp_path / "out")
    summary = lmdbloader.convert(src, tmp_path / "out", kind="lmdb", record="caffe", skip_bad=True)
    assert summary["records"] == 3 and len(summary["skipped"]) == 1 and words in summary["skipped"][0]


def test_a_record_whose_columns_differ_from_the_first_is_skipped_with_skip_bad(tmp_path):
    """The first record's columns are the corpus's: a later record without a
    label (or with one where the first had none) is refused, an error naming it,
    or, with skip_bad, skipped and listed; fields of a skipped record stay out
    of the schema."""
    records = [(b"k0", {"image": jpeg(0), "label": 3}),
               (b"k1", {"image": jpeg(1), "caption": "no label", "only_here": 1.5}),
               (b"k2", {"image": jpeg(2), "label": 4})]
    with lmdb.open(str(tmp_path / "maps"), map_size=1 << 20) as env, env.begin(write=True) as txn:
        for key, value in records:
            txn.put(key, msgpack.dumps(value))
    with pytest.raises(lmdbloader.ConvertError, match="key 'k1'.*0 columns, earlier records 1"):
        lmdbloader.convert(tmp_path / "maps", tmp_path / "out", kind="lmdb", record="msgpack")
    assert not os.path.exists(tmp_path / "out")
    summary = lmdbloader.convert(tmp_path / "maps", tmp_path / "out", kind="lmdb", record="msgpack", skip_bad=True)
    assert summary["records"] == 2 and len(summary["skipped"]) == 1, summary
    assert "(key 'k1')" in summary["skipped"][0] and "0 columns, earlier records 1" in summary["skipped"][0]
    ds = lmdbloader.LmdbDataset(str(tmp_path / "out"))
    assert ds.column("label").tolist() == [3, 4]
    assert [ds[i] for i in range(2)] == [records[0][1], records[2][1]]
    assert lmdbloader.Reader(str(tmp_path / "out")).manifest["schema"]["fields"] == ["image", "label"]
    # The command says the same.
    res = subprocess.run(["lmdbloader", "convert", "--from", "lmdb", "--record", "msgpack", "--skip-bad",
                          str(tmp_path / "maps"), str(tmp_path / "cli")], capture_output=True, text=True)
    assert res.returncode == 0 and "k1" in res.stdout + res.stderr, res
    assert len(lmdbloader.Reader(str(tmp_path / "cli"))) == 2


def test_record_is_for_lmdb_sources_and_its_names_are_checked(tmp_path):
    (tmp_path / "img" / "cls").mkdir(parents=True)
    (tmp_path / "img" / "cls" / "a.jpg").write_bytes(jpeg(0))
    with pytest.raises(lmdbloader.ConvertError, match="record raw applies to an lmdb source only"):
        lmdbloader.convert(tmp_path / "img", tmp_path / "out", kind="image_folder", record="raw")
    with pytest.raises(lmdbloader.ConvertError, match="record must be one of as_is, caffe, msgpack, raw; got 'pickle'"):
        lmdbloader.convert(tmp_path / "img", tmp_path / "out", kind="lmdb", record="pickle")


def test_caffe_datum_returns_a_view_into_the_record_and_its_fields():
    image = jpeg(3)
    record = datum(data=image, label=-4, encoded=True)
    channels, height, width, data, label, encoded = _core.caffe_datum(record)
    assert (channels, height, width, label, encoded) == (0, 0, 0, -4, True)
    assert isinstance(data, memoryview) and data.obj is record and bytes(data) == image  # no copy
    raw = datum(channels=1, height=2, width=3, data=b"abcdef", encoded=False)
    assert _core.caffe_datum(bytearray(raw))[:3] == (1, 2, 3)
    assert _core.caffe_datum(raw)[4] is None  # no label in the record
    with pytest.raises(lmdbloader.DecodeError, match="outside int32"):
        _core.caffe_datum(datum(data=b"x", label=1 << 40, encoded=True))


def test_a_batch_of_records_splits_in_one_call_into_views_and_targets():
    image = jpeg(3)
    record = datum(data=image, label=-4, encoded=True)
    gray = datum(channels=1, height=2, width=3, data=b"abcdef", encoded=False)  # no label: 0
    images, targets = _core.split_image_records([record, gray, memoryview(record)], "caffe")
    assert isinstance(images[0], memoryview) and images[0].obj is record and bytes(images[0]) == image  # no copy
    assert bytes(images[2]) == image and targets == [-4, 0, -4]
    assert images[1].shape == (2, 3, 3) and images[1][0, 1].tolist() == [ord("b")] * 3  # RGB from the gray plane
    with pytest.raises(lmdbloader.DecodeError, match="neither data nor float_data") as e:
        _core.split_image_records([record, b"", record], "caffe")
    assert e.value.batch_index == 1
    missing = object()
    images, targets = _core.split_image_records([msgpack.packb({"image": image})], "msgpack", "image", None,
                                                missing=missing)
    assert bytes(images[0]) == image and targets[0] is missing
    with pytest.raises(lmdbloader.DecodeError, match="not msgpack") as e:
        _core.split_image_records([msgpack.packb({"image": image}), image], "msgpack", "image", None)
    assert e.value.batch_index == 1
    # A record whose buffer has items wider than a byte, or two dimensions,
    # is sliced by its bytes all the same.
    record = next(r for n in range(4) if len(r := msgpack.packb({"image": image, "pad": b"x" * n})) % 4 == 0)
    for view in (memoryview(record).cast("I"), memoryview(record).cast("B", (2, len(record) // 2))):
        images, _ = _core.split_image_records([view], "msgpack", "image", None)
        assert bytes(images[0]) == image
    with pytest.raises(ValueError, match="no image to split"):
        _core.split_image_records([image], "as_is")
    with pytest.raises(ValueError, match="record must be one of"):
        _core.split_image_records([image], "pickle")
    with pytest.raises(TypeError, match="buffer protocol"):
        _core.caffe_datum("text")
