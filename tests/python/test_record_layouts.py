"""The fused decode path on the LMDB corpora users already have, written the
way their own tools write them: pickled (jpeg, label) tuples under b"%08d"
keys, Caffe Datums (encoded JPEGs and raw BGR pixels), CoCLR's frame lists
(one file, metadata records, labels in a CSV beside it) and bare encoded
images; each against torchvision's recipe over PIL. Then non-square output
sizes, and the bad inputs of each layout."""

import io
import pickle

import lmdb
import msgpack
import numpy as np
import pytest
import torch

import lmdbloader
import lmdbloader.vision as vision
from torchvision_cpu import import_torchvision

PIL = pytest.importorskip("PIL")
from PIL import Image  # noqa: E402

import_torchvision()
import torchvision.transforms as T  # noqa: E402

import synthetic_photos  # noqa: E402


def photo(seed, width, height):
    return synthetic_photos.photo(seed, width, height, noise=2)  # photographs are smoother than noise


def jpeg(image, quality=90):
    return synthetic_photos.jpeg(image, quality=quality)


def recipe(train, size, resize=None):
    if train:
        steps = [T.RandomResizedCrop(size, antialias=True), T.RandomHorizontalFlip()]
    else:
        short = size if isinstance(size, int) else min(size)
        steps = [T.Resize(resize or int(round(short * 256 / 224)), antialias=True), T.CenterCrop(size)]
    return T.Compose(steps + [T.ToTensor(), T.Normalize(vision.IMAGENET_MEAN, vision.IMAGENET_STD)])


def levels(a, b):
    """Mean absolute difference of two normalized images in levels of 255."""
    std = torch.tensor(vision.IMAGENET_STD).view(3, 1, 1)
    return float(((a - b).abs() * std).mean() * 255)


def write_lmdb(path, items, subdir=True):
    with lmdb.open(str(path), map_size=1 << 28, subdir=subdir) as env, env.begin(write=True) as txn:
        for key, value in items:
            txn.put(key, value)
    return str(path)


# -- Caffe's Datum, serialized as protobuf serializes it (caffe.proto) -------


def varint(n):
    n &= (1 << 64) - 1  # negative int32: ten bytes, two's complement
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def datum(data, label, encoded, channels=None, height=None, width=None):
    """As Caffe's ReadImageToDatum (encoded: data, label, encoded) or
    CVMatToDatum (channels, height, width, data, label, encoded=false) set
    the fields; fields serialized in field-number order."""
    out = b""
    for number, value in ((1, channels), (2, height), (3, width)):
        if value is not None:
            out += bytes([number << 3]) + varint(value)
    out += bytes([4 << 3 | 2]) + varint(len(data)) + data
    if label is not None:  # None: a Datum written without one
        out += bytes([5 << 3]) + varint(label)
    out += bytes([7 << 3]) + varint(int(encoded))
    return out


PHOTOS = [(i, 150 + (i * 41) % 260, 110 + (i * 59) % 230) for i in range(12)]


@pytest.fixture(scope="module")
def photos():
    return [(jpeg(photo(i, w, h)), i % 5) for i, w, h in PHOTOS]


def assert_like_torchvision(ds, sources, train, size=224, resize=None):
    """Seeded alike, each sample is torchvision's recipe of its source image
    (within 2 levels of 255 on average) with the expected label."""
    pipeline = recipe(train, size, resize)
    for i, (image, label) in enumerate(sources):
        torch.manual_seed(500 + i)
        got, got_label = ds[i]
        torch.manual_seed(500 + i)
        expected = pipeline(image)
        assert got.shape == expected.shape
        assert got_label == label, f"sample {i}"
        assert levels(got, expected) <= 2.0, f"sample {i}: {levels(got, expected):.2f} levels"


@pytest.mark.parametrize("train", [True, False])
def test_pickled_tuples_through_pickle_loads(tmp_path, photos, train):
    items = [(b"%08d" % i, pickle.dumps((data, label))) for i, (data, label) in enumerate(photos)]
    items += [(b"__keys__", pickle.dumps([k for k, _ in items])), (b"__len__", pickle.dumps(len(items)))]
    path = write_lmdb(tmp_path / "pickled", items)
    keys = [b"%08d" % i for i in range(len(photos))]
    ds = lmdbloader.LmdbDataset(path, keys=keys, decode=lmdbloader.ImageDecode(224, train=train,
                                                                                record=pickle.loads))
    assert len(ds) == len(photos)
    sources = [(Image.open(io.BytesIO(d)).convert("RGB"), label) for d, label in photos]
    assert_like_torchvision(ds, sources, train)
    # Through the ring, every worker, a batch as default_collate makes it.
    loader = lmdbloader.DataLoader(ds, batch_size=4, num_workers=2)
    batches = list(loader)
    assert [b[0].shape for b in batches] == [(4, 3, 224, 224)] * 3
    assert torch.cat([b[1] for b in batches]).tolist() == [label for _, label in photos]


def test_caffe_datums_encoded_and_raw_pixels(tmp_path, photos):
    items, sources = [], []
    for i, (data, label) in enumerate(photos):
        image = Image.open(io.BytesIO(data)).convert("RGB")
        if i % 2:  # CVMatToDatum: C x H x W planes, BGR
            bgr = np.asarray(image)[:, :, ::-1].transpose(2, 0, 1)
            value = datum(bgr.tobytes(), label, False, 3, image.height, image.width)
        else:  # ReadImageToDatum: the file's bytes
            value = datum(data, label, True)
        items.append((b"%08d_photo_%d.jpg" % (i, i), value))
        sources.append((image, label))
    gray = np.asarray(photo(99, 90, 70).convert("L"))
    items.append((b"%08d_gray.png" % len(photos), datum(gray.tobytes(), 7, False, 1, 70, 90)))
    sources.append((Image.fromarray(gray).convert("RGB"), 7))
    path = write_lmdb(tmp_path / "caffe", items)
    for train in (True, False):
        decode = lmdbloader.ImageDecode(224, train=train, record="caffe")
        ds = lmdbloader.LmdbDataset(path, decode=decode)
        assert_like_torchvision(ds, sources, train)
        assert decode.stats()["pixels"] >= 7 and decode.stats()["jpeg"] >= 6
    loader = lmdbloader.DataLoader(lmdbloader.LmdbDataset(path, decode=lmdbloader.ImageDecode(64, record="caffe")),
                                   batch_size=13, num_workers=1)
    (images, labels), = list(loader)
    assert images.shape == (13, 3, 64, 64) and labels.tolist() == [s[1] for s in sources]


def test_bare_encoded_images(tmp_path, photos):
    path = write_lmdb(tmp_path / "lsun", [(b"img%03d" % i, d) for i, (d, _) in enumerate(photos)])
    ds = lmdbloader.LmdbDataset(path, decode=lmdbloader.ImageDecode(96, train=False, record="raw"))
    got = ds[3]
    expected = recipe(False, 96)(Image.open(io.BytesIO(photos[3][0])).convert("RGB"))
    assert isinstance(got, torch.Tensor) and levels(got, expected) <= 2.0
    # targets from beside the database
    ds = lmdbloader.LmdbDataset(path, decode=lmdbloader.ImageDecode(96, record="raw"),
                                targets=np.arange(len(photos)) * 10)
    assert ds[5][1] == 50
    batch = next(iter(lmdbloader.DataLoader(ds, batch_size=4, num_workers=1)))
    assert batch[1].tolist() == [0, 10, 20, 30] and batch[1].dtype == torch.int64


@pytest.fixture(scope="module")
def coclr(tmp_path_factory):
    """CoCLR's UCF101 layout: one file, per video msgpack.dumps([jpeg, ...])
    under its index as ASCII, metadata records; labels in a CSV beside it."""
    root = tmp_path_factory.mktemp("coclr")
    frames = {v: [jpeg(photo(100 * v + t, 171, 128)) for t in range(12 + v)] for v in range(6)}
    items = [(str(v).encode(), msgpack.dumps(fs)) for v, fs in frames.items()]
    keys = [k for k, _ in items]
    items += [(b"__keys__", msgpack.dumps(keys)), (b"__len__", msgpack.dumps(len(keys))),
              (b"__order__", msgpack.dumps(keys))]
    path = write_lmdb(root / "frames.lmdb", items, subdir=False)
    (root / "train_split.csv").write_text("".join(f"{v},{v % 3}\n" for v in (4, 1, 5, 2)))
    return path, frames, root / "train_split.csv"


def test_coclr_two_clips_from_a_split_file(coclr):
    path, frames, split = coclr
    rows = [line.split(",") for line in split.read_text().split()]
    keys, labels = [r[0] for r in rows], [int(r[1]) for r in rows]
    decode = lmdbloader.ClipDecode(112, frames=8, stride=1, clips=2)
    ds = lmdbloader.LmdbDataset(path, keys=keys, targets=labels, decode=decode, lock=False)
    assert len(ds) == 4
    torch.manual_seed(3)
    clips, label = ds[1]
    assert clips.shape == (2, 8, 3, 112, 112) and label == labels[1]
    assert not torch.equal(clips[0], clips[1])  # two views: own start, box and flip
    batches = list(lmdbloader.DataLoader(ds, batch_size=2, num_workers=2, shuffle=True))
    assert sorted(torch.cat([b[1] for b in batches]).tolist()) == sorted(labels)
    assert all(b[0].shape == (2, 2, 8, 3, 112, 112) for b in batches)
    # Evaluation: each frame is torchvision's Resize(128) + CenterCrop(112)
    # of that frame; both clips are the middle clip.
    ds = lmdbloader.LmdbDataset(path, keys=keys, targets=labels,
                                decode=lmdbloader.ClipDecode(112, frames=8, stride=2, clips=2, train=False))
    clips, _ = ds[0]
    video = frames[4]  # 16 frames, span 15: start 0
    pipeline = recipe(False, 112, 128)
    for t in range(8):
        expected = pipeline(Image.open(io.BytesIO(video[2 * t])).convert("RGB"))
        assert levels(clips[0, t], expected) <= 2.0 and torch.equal(clips[0, t], clips[1, t])


def test_clips_one_keeps_the_shape_and_a_callable_gives_frames(coclr):
    path, _, _ = coclr
    keys = ["0", "3"]
    ds = lmdbloader.LmdbDataset(path, keys=keys, decode=lmdbloader.ClipDecode(64, frames=4, clips=1))
    assert ds[0].shape == (4, 3, 64, 64)  # no target in the record, none given
    by_fn = lmdbloader.ClipDecode(64, frames=4, train=False, record=lambda r: (msgpack.unpackb(r), 9))
    clip, label = lmdbloader.LmdbDataset(path, keys=keys, decode=by_fn)[1]
    assert clip.shape == (4, 3, 64, 64) and label == 9


# -- non-square sizes ----------------------------------------------------------


@pytest.mark.parametrize("size", [(224, 320), (112, 160), (300, 200)])
@pytest.mark.parametrize("train", [True, False])
def test_non_square_sizes_are_torchvisions(tmp_path, size, train):
    """(height, width) outputs, training and evaluation, against
    torchvision; evaluation of a portrait photo to a landscape size pads, as
    CenterCrop does."""
    sources = [(photo(i, w, h), 0) for i, w, h in ((1, 400, 300), (2, 300, 420), (3, 160, 500), (4, 500, 150))]
    decode = lmdbloader.ImageDecode(size, train=train, record="raw")
    for i, (image, label) in enumerate(sources):
        torch.manual_seed(40 + i)
        got = decode(jpeg(image))
        torch.manual_seed(40 + i)
        expected = recipe(train, size)(image)
        assert got.shape == (3, *size)
        assert levels(got, expected) <= 2.0, f"{size} image {i}: {levels(got, expected):.2f} levels"
    for resize in (100, 400):  # smaller than the crop: padding on both axes
        got = lmdbloader.ImageDecode(size, train=False, resize=resize, record="raw", dtype=torch.uint8,
                                     flip=1.0)(jpeg(sources[1][0]))
        expected = T.Compose([T.Resize(resize, antialias=True), T.CenterCrop(size), T.RandomHorizontalFlip(1.0),
                              T.PILToTensor()])(sources[1][0])
        assert (got.int() - expected.int()).abs().float().mean() <= 2.0, resize


def test_non_square_clips(coclr):
    path, frames, _ = coclr
    ds = lmdbloader.LmdbDataset(path, keys=["2"], decode=lmdbloader.ClipDecode((112, 160), frames=8, train=False))
    clip = ds[0]
    assert clip.shape == (8, 3, 112, 160)
    pipeline = T.Compose([T.Resize(128, antialias=True), T.CenterCrop((112, 160)), T.ToTensor(),
                          T.Normalize(vision.IMAGENET_MEAN, vision.IMAGENET_STD)])
    video = frames[2]  # 14 frames, span 8: start 3
    for t in range(8):
        assert levels(clip[t], pipeline(Image.open(io.BytesIO(video[3 + t])).convert("RGB"))) <= 2.0
    torch.manual_seed(0)
    train = lmdbloader.LmdbDataset(path, keys=["2"], decode=lmdbloader.ClipDecode((112, 160), frames=8, clips=2))
    assert train[0].shape == (2, 8, 3, 112, 160)


# -- bad input -----------------------------------------------------------------


def raising(record):
    raise RuntimeError("no image here")


def wrong_type(record):
    return 42


def not_an_image(record):
    return b"not an image at all", 1


def three(record):
    return b"", 1, 2


@pytest.fixture(scope="module")
def pickled(tmp_path_factory, photos):
    path = tmp_path_factory.mktemp("bad") / "pickled"
    return write_lmdb(path, [(b"%08d" % i, pickle.dumps((d, label))) for i, (d, label) in enumerate(photos[:4])])


@pytest.mark.parametrize("fn, error, message", [
    (raising, RuntimeError, "no image here"),
    (wrong_type, TypeError, "returned int"),
    (not_an_image, lmdbloader.DecodeError, "not a decodable image"),
    (three, TypeError, "tuple of 3"),
])
@pytest.mark.parametrize("workers", [0, 1])
def test_a_bad_callable_names_the_record_and_file(pickled, fn, error, message, workers):
    ds = lmdbloader.LmdbDataset(pickled, decode=lmdbloader.ImageDecode(32, record=fn))
    with pytest.raises(error, match=message) as raised:
        list(lmdbloader.DataLoader(ds, batch_size=2, num_workers=workers))
    where = str(raised.value) + "".join(getattr(raised.value, "__notes__", []))
    if workers == 0:
        assert f"record 0 of {pickled}" in where


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_start_methods_with_keys_targets_and_pickle_loads(pickled, method):
    ds = lmdbloader.LmdbDataset(pickled, keys=[b"00000003", b"00000001"], targets=[5.5, 6.5],
                                decode=lmdbloader.ImageDecode(32, record=pickle.loads))
    batches = list(lmdbloader.DataLoader(ds, batch_size=2, num_workers=1, multiprocessing_context=method))
    assert batches[0][0].shape == (2, 3, 32, 32) and batches[0][1].tolist() == [5.5, 6.5]


def test_bad_datums(tmp_path, photos):
    good = datum(photos[0][0], 1, True)
    raw = np.zeros((3, 4, 5), np.uint8).tobytes()
    bad = {"truncated": good[: len(good) // 2], "short pixels": datum(raw[:-1], 0, False, 3, 4, 5),
           "four channels": datum(np.zeros(80, np.uint8).tobytes(), 0, False, 4, 4, 5),
           "bad wire type": good + bytes([9 << 3 | 3]), "not an image": datum(b"\x00" * 50, 0, True)}
    path = write_lmdb(tmp_path / "bad_caffe", [(b"%08d" % i, v) for i, v in enumerate([good, *bad.values()])])
    ds = lmdbloader.LmdbDataset(path, decode=lmdbloader.ImageDecode(32, record="caffe"))
    assert ds[0][1] == 1
    for i, name in enumerate(bad, start=1):
        with pytest.raises(lmdbloader.DecodeError, match=f"record {i} of {path}"):
            ds[i]
    with pytest.raises(lmdbloader.DecodeError, match="record [0-9] of"):
        list(lmdbloader.DataLoader(ds, batch_size=6, num_workers=1))


def test_bad_keys_and_targets(pickled):
    with pytest.raises(KeyError, match=r"2 of the 4 keys are not in .*'missing', b'00000009'"):
        lmdbloader.LmdbDataset(pickled, keys=["00000000", "missing", b"00000009", "00000001"])
    with pytest.raises(ValueError, match="one number per sample: 2"):
        lmdbloader.LmdbDataset(pickled, keys=["00000000", "00000001"], targets=[1, 2, 3])
    with pytest.raises(ValueError, match="one number per sample: 4"):
        lmdbloader.LmdbDataset(pickled, targets=[1])
    with pytest.raises(TypeError, match="numbers"):
        lmdbloader.LmdbDataset(pickled, targets=["a", "b", "c", "d"])
    with pytest.raises(TypeError):
        lmdbloader.LmdbDataset(pickled, keys="00000000")
    with pytest.raises(ValueError, match="record"):
        lmdbloader.ImageDecode(32, record="protobuf")
    with pytest.raises(ValueError, match="record"):
        lmdbloader.ClipDecode(32, record="caffe")
    ds = lmdbloader.LmdbDataset(pickled, keys=["00000002"], decode="raw")
    assert len(ds) == 1 and pickle.loads(ds[0])[1] == 2
    with pytest.raises(IndexError):
        ds[1]
    # the dataset holds its keys and targets as numpy arrays, not lists
    ds = lmdbloader.LmdbDataset(pickled, keys=["00000002", "00000000"], targets=[1, 2], decode="raw")
    assert isinstance(ds._positions, np.ndarray) and isinstance(ds._targets, np.ndarray)
    assert ds[1] == (lmdbloader.Reader(pickled)[0], 2)


def test_keys_map_names_and_positions(tmp_path):
    src = tmp_path / "src" / "class_0"
    src.mkdir(parents=True)
    for i in range(3):
        (src / f"{i}.jpg").write_bytes(jpeg(photo(i, 40, 30)))
    lmdbloader.convert(str(tmp_path / "src"), str(tmp_path / "c"), kind="image_folder")
    full = lmdbloader.LmdbDataset(str(tmp_path / "c"))
    keys = [full.reader.key(2), full.reader.key(0)]
    ds = lmdbloader.LmdbDataset(str(tmp_path / "c"), keys=keys)
    assert ds.positions().tolist() == [2, 0]
    assert [ds.name(0), ds.name(1)] == [full.name(2), full.name(0)]
    assert ds.column("label")[ds.positions()].tolist() == [0, 0]


def test_a_converted_caffe_corpus_reads_as_the_datums_do(tmp_path, photos):
    """convert --record caffe writes encoded Datums as {image, label} and raw
    ones as {pixels, channels, height, width, label}: both decode as the
    Datums themselves do, the labels a column. A Datum without a label has
    label 0 through either route (protobuf's absent int32, as Caffe reads it)."""
    items = []
    labelled = [(data, None if i == 2 else label) for i, (data, label) in enumerate(photos[:4])]
    for i, (data, label) in enumerate(labelled):
        image = Image.open(io.BytesIO(data)).convert("RGB")
        bgr = np.asarray(image)[:, :, ::-1].transpose(2, 0, 1)
        value = datum(bgr.tobytes(), label, False, 3, image.height, image.width) if i % 2 else datum(data, label, True)
        items.append((b"%08d_%d.jpg" % (i, i), value))
    src = write_lmdb(tmp_path / "caffe", items)
    lmdbloader.convert(src, str(tmp_path / "corpus"), kind="lmdb", record="caffe")
    by_datum = lmdbloader.LmdbDataset(src, decode=lmdbloader.ImageDecode(64, train=False, record="caffe"))
    converted = lmdbloader.LmdbDataset(str(tmp_path / "corpus"), decode=lmdbloader.ImageDecode(64, train=False))
    assert converted.column("label").tolist() == [label or 0 for _, label in labelled]
    for i in range(4):
        (a, la), (b, lb) = by_datum[i], converted[i]
        assert torch.equal(a, b) and la == lb == (labelled[i][1] or 0)


def test_records_msgpack_0_6_wrote_bytes_as_str(tmp_path):
    """msgpack-python before 1.0 packed bytes as str (CoCLR's published
    LMDBs): such frames and fields decode as the same records packed today."""
    frames = [jpeg(photo(60 + t, 96, 72)) for t in range(6)]
    image = jpeg(photo(70, 96, 72))
    path = write_lmdb(tmp_path / "old", [
        (b"0", msgpack.packb(frames, use_bin_type=False)), (b"1", msgpack.packb(frames)),
        (b"2", msgpack.packb({"image": image, "label": 3}, use_bin_type=False)),
        (b"3", msgpack.packb({"image": image, "label": 3})), (b"4", b"\xc1\xc1")])
    clips = lmdbloader.LmdbDataset(path, keys=["0", "1"], decode=lmdbloader.ClipDecode(48, frames=4, train=False))
    assert torch.equal(clips[0], clips[1])
    # decode="msgpack" gives them as msgpack-python packed them: the JPEGs bytes, text text.
    records = lmdbloader.LmdbDataset(path, keys=["0", "1", "2", "3"], decode="msgpack")
    assert records[0] == records[1] == frames
    assert records[2] == records[3] == {"image": image, "label": 3}
    images = lmdbloader.LmdbDataset(path, keys=["2", "3"], decode=lmdbloader.ImageDecode(48, train=False))
    (a, la), (b, lb) = images[0], images[1]
    assert torch.equal(a, b) and la == lb == 3
    with pytest.raises(lmdbloader.DecodeError, match="a clip's frames are a msgpack list"):
        lmdbloader.LmdbDataset(path, keys=["4"], decode=lmdbloader.ClipDecode(48, frames=4))[0]
    # Converted, each reads as its source does: clips and images (a corpus's
    # records have one set of columns) apart.
    for name, keys in (("clips", (b"0", b"1")), ("images", (b"2", b"3"))):
        with lmdb.open(path, readonly=True, lock=False) as env, env.begin() as txn:
            write_lmdb(tmp_path / f"src-{name}", [(k, txn.get(k)) for k in keys])
        lmdbloader.convert(str(tmp_path / f"src-{name}"), str(tmp_path / name), kind="lmdb", record="msgpack")
    converted = lmdbloader.LmdbDataset(str(tmp_path / "clips"), decode="msgpack")
    assert converted[0] == converted[1] == {"frames": frames}
    copies = lmdbloader.LmdbDataset(str(tmp_path / "clips"),
                                    decode=lmdbloader.ClipDecode(48, frames=4, train=False, target=None))
    assert torch.equal(copies[0], clips[0]) and torch.equal(copies[1], clips[0])
    converted = lmdbloader.LmdbDataset(str(tmp_path / "images"), decode="msgpack")
    assert converted[0] == converted[1] == {"image": image, "label": 3}
    copied = lmdbloader.LmdbDataset(str(tmp_path / "images"), decode=lmdbloader.ImageDecode(48, train=False))
    for k in range(2):
        c, lc = copied[k]
        assert torch.equal(c, a) and lc == 3


def test_targets_stand_for_records_without_one_and_transforms_see_the_image(tmp_path, photos):
    """targets= overrides the record's target even where the record has
    none; a transform then gets the image alone (as with every decode);
    indices are integers only; what a callable returns may be a list pair or
    a strided view; the locality sampler follows keys."""
    path = write_lmdb(tmp_path / "nolabel", [(b"%d" % i, msgpack.packb({"image": d})) for i, (d, _) in
                                              enumerate(photos[:4])])
    ds = lmdbloader.LmdbDataset(path, decode=lmdbloader.ImageDecode(32), targets=[1, 2, 3, 4])
    assert ds[2][1] == 3
    batch = next(iter(lmdbloader.DataLoader(ds, batch_size=4, num_workers=1)))
    assert batch[1].tolist() == [1, 2, 3, 4]
    flipped = lmdbloader.LmdbDataset(path, decode=lmdbloader.ImageDecode(32, train=False), targets=[1, 2, 3, 4],
                                     transform=lambda image: image.flip(-1))
    plain = lmdbloader.LmdbDataset(path, decode=lmdbloader.ImageDecode(32, train=False), targets=[1, 2, 3, 4])
    (a, ta), (b, tb) = flipped[1], plain[1]
    assert torch.equal(a, b.flip(-1)) and ta == tb == 2
    for bad in (1.0, True, "1"):
        with pytest.raises(TypeError):
            ds[bad]
    assert ds[np.int64(1)][1] == 2
    as_list = lmdbloader.ImageDecode(32, train=False, record=lambda r: [msgpack.unpackb(r)["image"], 7])
    assert as_list(lmdbloader.Reader(path)[0])[1] == 7
    strided = lmdbloader.ImageDecode(32, train=False, record=lambda r: memoryview(msgpack.unpackb(r)["image"]))
    assert strided(lmdbloader.Reader(path)[0]).shape == (3, 32, 32)
    keyed = lmdbloader.LmdbDataset(path, keys=["3", "1"], decode="raw")
    assert sorted(lmdbloader.LocalitySampler(keyed)) == [0, 1]
