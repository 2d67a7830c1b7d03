"""Samples made of several records (LmdbDataset(samples=...), KeyedSamples):
the OCR layout as create_lmdb_dataset.py writes it (deep-text-recognition-
benchmark, parseq, ABINet), read back as py-lmdb reads it, through
num_workers=0 and DataLoader workers under fork, spawn and forkserver; its
images through ImageDecode; a general two-pattern case; and the bad inputs
(a pattern that matches nothing, a count that lies, holes, text that is not
UTF-8), each refused with the right exception naming the file."""

import io
import pickle

import lmdb
import numpy as np
import pytest
import torch
import torch.utils.data

import lmdbloader
from lmdbloader import vision
from torchvision_cpu import import_torchvision

PIL = pytest.importorskip("PIL")
from PIL import Image  # noqa: E402

import_torchvision()
import torchvision.transforms as T  # noqa: E402

import synthetic_photos  # noqa: E402

SAMPLES = 300
WORDS = ["Straße", "café", "日本語", "OCR", "parseq", "ABINet", "x", "ℵ0", "naïve", "42"]


def word_image(k):
    """A small word-crop-like JPEG: wide, short, of a few sizes."""
    image = synthetic_photos.photo(k, 40 + (k * 37) % 90, 16 + (k * 11) % 24, noise=2)
    return synthetic_photos.jpeg(image, quality=85)


def create_lmdb_dataset(output_path, samples, num_samples=None):
    """What create_lmdb_dataset.py (deep-text-recognition-benchmark) does,
    its image files and gt file replaced by `samples` [(image bytes, label)]:
    keys 'image-%09d' / 'label-%09d' from 1, written 1000 at a time, then
    'num-samples' (``num_samples`` overrides it, to make it lie)."""
    env = lmdb.open(output_path, map_size=1 << 30)  # theirs: 1 TiB, sparse; the same records
    cache = {}
    cnt = 1
    for image_bin, label in samples:
        cache[b"image-%09d" % cnt] = image_bin
        cache[b"label-%09d" % cnt] = label.encode()
        if cnt % 1000 == 0:
            _write_cache(env, cache)
            cache = {}
        cnt += 1
    n_samples = cnt - 1
    cache[b"num-samples"] = str(n_samples if num_samples is None else num_samples).encode()
    _write_cache(env, cache)
    env.close()
    return output_path


def _write_cache(env, cache):
    with env.begin(write=True) as txn:
        for k, v in cache.items():
            txn.put(k, v)


def pylmdb_samples(path):
    """The samples as their readers read them (deep-text-recognition-benchmark's
    LmdbDataset.__getitem__, minus PIL): (image bytes, label str)."""
    env = lmdb.open(path, readonly=True, lock=False)
    with env.begin() as txn:
        n = int(txn.get(b"num-samples"))
        out = [(txn.get(b"image-%09d" % k), txn.get(b"label-%09d" % k).decode("utf-8"))
               for k in range(1, n + 1)]
    env.close()
    return out


@pytest.fixture(scope="module")
def ocr(tmp_path_factory):
    """(path, [(image bytes, label)]): SAMPLES samples in the OCR layout."""
    samples = [(word_image(k), f"{WORDS[k % len(WORDS)]}{k}") for k in range(SAMPLES)]
    path = create_lmdb_dataset(str(tmp_path_factory.mktemp("ocr") / "train"), samples)
    expected = pylmdb_samples(path)
    assert expected == samples
    return path, expected


def test_ocr_samples_are_what_pylmdb_reads(ocr):
    path, expected = ocr
    ds = lmdbloader.LmdbDataset(path, samples="ocr", decode="raw")
    assert len(ds) == SAMPLES
    for i in range(SAMPLES):
        assert ds[i] == expected[i], f"sample {i}"
    assert ds[-1] == expected[-1]
    order = np.random.default_rng(0).permutation(SAMPLES)[:64].tolist()
    assert ds.__getitems__(order) == [expected[i] for i in order]
    assert ds.__getitems__([]) == []
    with pytest.raises(IndexError, match=f"sample {SAMPLES} out of range: {path}"):
        ds[SAMPLES]
    with pytest.raises(IndexError):
        ds.__getitems__([0, -SAMPLES - 1])
    # The position of each sample's image, as index_of finds it.
    reader = lmdbloader.Reader(path)
    assert ds.positions()[[0, 7, SAMPLES - 1]].tolist() == [
        reader.index_of(b"image-%09d" % k) for k in (1, 8, SAMPLES)]
    assert sorted(lmdbloader.LocalitySampler(ds)) == list(range(SAMPLES))


def test_ocr_dataset_holds_no_keys_and_pickles_its_configuration(ocr):
    path, expected = ocr
    ds = lmdbloader.LmdbDataset(path, samples="ocr", decode="raw")
    state = pickle.dumps(ds)
    assert len(state) < 2048 and b"image-000000" not in state, len(state)
    assert not any(isinstance(v, (list, dict, np.ndarray)) and len(v) >= SAMPLES for v in vars(ds).values())
    again = pickle.loads(state)
    assert len(again) == SAMPLES and again[5] == expected[5]


def test_ocr_samples_in_a_map_decode_tensor_and_msgpack(ocr):
    """decode= applies to the image record whatever it is; the label stays str."""
    path, expected = ocr
    sizes = lmdbloader.LmdbDataset(path, samples="ocr", decode=len, transform=lambda n: n * 2)
    assert sizes.__getitems__([3, 1]) == [(2 * len(expected[3][0]), expected[3][1]),
                                          (2 * len(expected[1][0]), expected[1][1])]
    tensors = lmdbloader.LmdbDataset(path, samples="ocr", decode="tensor")
    image, label = tensors[4]
    assert image.dtype == torch.uint8 and bytes(image.numpy()) == expected[4][0] and label == expected[4][1]
    assert [(bytes(x.numpy()), y) for x, y in tensors.__getitems__([9, 2])] == [expected[9], expected[2]]
    assert tensors.with_deferred_batches() is None  # the label cannot travel in a RecordBatch


def ocr_batches(loader):
    """[(image bytes, label)] over the loader's batches ([images, labels],
    each a tuple, as default_collate makes them of str and bytes)."""
    out = []
    for images, labels in loader:
        assert isinstance(labels, tuple) and all(isinstance(t, str) for t in labels)
        out += list(zip(images, labels))
    return out


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_ocr_through_workers_every_start_method(ocr, method):
    """lmdbloader.DataLoader, 2 workers: the images decoded into the ring
    (evaluation draws nothing: each is ImageDecode of the bytes py-lmdb
    reads), the labels beside them as default_collate gives str; under fork
    also torch's DataLoader over the raw bytes."""
    path, expected = ocr
    decode = lmdbloader.ImageDecode(16, train=False, record="raw", dtype=torch.uint8)
    images = lmdbloader.LmdbDataset(path, samples="ocr", decode=decode)
    loader = lmdbloader.DataLoader(images, batch_size=50, num_workers=2, multiprocessing_context=method)
    got_x, got_y = [], []
    for x, y in loader:
        assert x.shape == (50, 3, 16, 16) and isinstance(y, tuple)
        got_x.append(x)
        got_y += y
    assert got_y == [label for _, label in expected]
    assert torch.equal(torch.cat(got_x), torch.stack([decode(image) for image, _ in expected]))
    assert loader.ring_stats()["in_ring"] >= 4  # the first batch of each worker sizes its ring
    if method == "fork":
        raw = lmdbloader.LmdbDataset(path, samples="ocr", decode="raw")
        loader = torch.utils.data.DataLoader(raw, batch_size=50, num_workers=2, multiprocessing_context=method)
        assert ocr_batches(loader) == expected


def test_ocr_with_num_workers_0_through_both_loaders(ocr):
    path, expected = ocr
    raw = lmdbloader.LmdbDataset(path, samples="ocr", decode="raw")
    assert ocr_batches(torch.utils.data.DataLoader(raw, batch_size=64)) == expected
    assert ocr_batches(lmdbloader.DataLoader(raw, batch_size=64)) == expected
    decode = lmdbloader.ImageDecode(24, train=False, record="raw", dtype=torch.uint8)
    images = lmdbloader.LmdbDataset(path, samples="ocr", decode=decode)
    (x, y), = list(lmdbloader.DataLoader(images, batch_size=SAMPLES, sampler=[7, 3, 250]))
    assert x.shape == (3, 3, 24, 24) and y == tuple(expected[i][1] for i in (7, 3, 250))
    assert torch.equal(x, torch.stack([decode(expected[i][0]) for i in (7, 3, 250)]))


def levels(a, b):
    """Mean absolute difference of two normalized images in levels of 255."""
    std = torch.tensor(vision.IMAGENET_STD).view(3, 1, 1)
    return float(((a - b).abs() * std).mean() * 255)


@pytest.mark.parametrize("train", [True, False])
def test_ocr_images_through_image_decode_are_torchvisions(ocr, train):
    """The image slot through ImageDecode (record="raw") is torchvision's
    recipe over PIL of the bytes py-lmdb reads, seeded alike; the label is
    the text, not ImageDecode's target."""
    path, expected = ocr
    size = (32, 100) if train else (24, 24)  # evaluation: the crop inside the resized image, no padding
    ds = lmdbloader.LmdbDataset(path, samples="ocr", decode=lmdbloader.ImageDecode(size, train=train, record="raw"))
    if train:
        steps = [T.RandomResizedCrop(size, antialias=True), T.RandomHorizontalFlip()]
    else:
        steps = [T.Resize(round(24 * 256 / 224), antialias=True), T.CenterCrop(size)]
    recipe = T.Compose(steps + [T.ToTensor(), T.Normalize(vision.IMAGENET_MEAN, vision.IMAGENET_STD)])
    for i in range(0, SAMPLES, 29):
        torch.manual_seed(900 + i)
        image, label = ds[i]
        torch.manual_seed(900 + i)
        want = recipe(Image.open(io.BytesIO(expected[i][0])).convert("RGB"))
        assert label == expected[i][1]
        assert image.shape == (3, *size) and levels(image, want) <= 2.0, f"sample {i}: {levels(image, want):.2f}"
    # A transform sees the image alone, the label goes beside it.
    flipped = lmdbloader.LmdbDataset(path, samples="ocr", transform=lambda x: x.flip(-1),
                                     decode=lmdbloader.ImageDecode(size, train=False, record="raw"))
    image, label = flipped.__getitems__([8])[0]
    assert label == expected[8][1]
    torch.manual_seed(0)
    assert torch.equal(image, lmdbloader.ImageDecode(size, train=False, record="raw")(expected[8][0]).flip(-1))


# -- the general case ----------------------------------------------------------


@pytest.fixture(scope="module")
def interleaved(tmp_path_factory):
    """Per sample "%06d.jpg" (an image) and "%06d.cls" (a class id as bytes),
    numbered from 0: keys interleave, so positions are looked up; plus a
    metadata record."""
    items = {}
    for k in range(40):
        items[b"%06d.jpg" % k] = word_image(k)
        items[b"%06d.cls" % k] = bytes([k % 7, 0xFF])  # not text
    items[b"__len__"] = b"40"
    path = str(tmp_path_factory.mktemp("general") / "db")
    with lmdb.open(path, map_size=1 << 26) as env, env.begin(write=True) as txn:
        for key, value in items.items():
            txn.put(key, value)
    return path, items


def test_two_patterns_str_format_and_bytes_with_a_count(interleaved):
    path, items = interleaved
    samples = lmdbloader.KeyedSamples(["{:06d}.jpg", b"%06d.cls"], count=40)
    ds = lmdbloader.LmdbDataset(path, samples=samples, decode="raw")
    assert len(ds) == 40 and ds._keyed.bases == (None, None)  # interleaved: looked up
    for i in range(40):
        assert ds[i] == (items[b"%06d.jpg" % i], items[b"%06d.cls" % i])
    # The count from a record, and a first number other than 0 or 1.
    by_record = lmdbloader.KeyedSamples(["%06d.cls", "%06d.jpg"], count="__len__")
    assert lmdbloader.LmdbDataset(path, samples=by_record, decode="raw")[39] == (items[b"000039.cls"],
                                                                                 items[b"000039.jpg"])
    tail = lmdbloader.LmdbDataset(path, samples=lmdbloader.KeyedSamples(["{:06d}.jpg"], 3, start=37), decode="raw")
    assert [tail[i] for i in range(3)] == [items[b"%06d.jpg" % k] for k in (37, 38, 39)]  # one record: itself
    batches = list(torch.utils.data.DataLoader(ds, batch_size=16, num_workers=1))
    assert [c for _, cs in batches for c in cs] == [items[b"%06d.cls" % k] for k in range(40)]


def test_a_guessed_position_is_checked_before_it_is_trusted(tmp_path):
    """A foreign key and a hole cancel out (the last key sits count - 1
    after the first): guesses past the foreign key are wrong, and found by
    lookup; the hole is a KeyError naming the file and key when read."""
    items = {b"image-%09d" % k: b"i%d" % k for k in range(1, 21) if k != 12}
    items.update({b"label-%09d" % k: b"l%d" % k for k in range(1, 21) if k != 12})
    items[b"image-000000005.bak"] = b"foreign"
    items[b"label-000000005.bak"] = b"foreign"
    items[b"num-samples"] = b"20"
    path = str(tmp_path / "holes")
    with lmdb.open(path, map_size=1 << 24) as env, env.begin(write=True) as txn:
        for key, value in items.items():
            txn.put(key, value)
    ds = lmdbloader.LmdbDataset(path, samples="ocr", decode="raw")
    assert ds._keyed.bases[0] is not None  # the guess is tried
    assert [ds[i] for i in range(11)] == [(f"i{k}".encode(), f"l{k}") for k in range(1, 12)]
    assert ds[19] == (b"i20", "l20")
    with pytest.raises(KeyError, match=f"{path}: no key b'image-000000012', which sample 11 needs"):
        ds[11]
    with pytest.raises(KeyError, match=f"{path}: no key b'image-000000012'"):
        list(torch.utils.data.DataLoader(ds, batch_size=8))  # (a worker's error costs torch 5 s to shut down)


def test_msgpack_first_records_with_text_and_bytes_beside(tmp_path):
    """decode="msgpack" (the default) decodes the first records in C++, the
    transform sees them alone; a text slot and a bytes slot follow."""
    import msgpack
    path = str(tmp_path / "meta")
    with lmdb.open(path, map_size=1 << 24) as env, env.begin(write=True) as txn:
        for k in range(5):
            txn.put(f"meta/{k:03d}".encode(), msgpack.packb({"id": k, "tags": ["a", "b"][: k % 3]}))
            txn.put(f"text/{k:03d}".encode(), f"zeile {k} ü".encode())
            txn.put(f"blob/{k:03d}".encode(), bytes(range(k)))
    samples = lmdbloader.KeyedSamples(["meta/{:03d}", "text/{:03d}", "blob/%03d"], count=5, text=[1])
    ds = lmdbloader.LmdbDataset(path, samples=samples, transform=lambda m: m["id"] * 10)
    assert ds[4] == (40, "zeile 4 ü", bytes(range(4)))
    assert ds.__getitems__([1, 0]) == [(10, "zeile 1 ü", b"\x00"), (0, "zeile 0 ü", b"")]
    plain = lmdbloader.LmdbDataset(path, samples=samples)
    assert plain[2] == ({"id": 2, "tags": ["a", "b"]}, "zeile 2 ü", b"\x00\x01")


# -- bad input -----------------------------------------------------------------


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """Ten samples, written as create_lmdb_dataset.py writes them."""
    return [(word_image(k), f"w{k}") for k in range(10)]


def test_a_pattern_that_matches_nothing_names_the_file(ocr):
    path, _ = ocr
    with pytest.raises(KeyError, match=rf"{path}: the key pattern 'img-{{:09d}}' matches nothing"):
        lmdbloader.LmdbDataset(path, samples=lmdbloader.KeyedSamples(["image-{:09d}", "img-{:09d}"],
                                                                      count="num-samples", start=1))
    with pytest.raises(KeyError, match=f"{path}: the key pattern 'image-%09d' matches nothing.*sample 0"):
        lmdbloader.LmdbDataset(path, samples=lmdbloader.KeyedSamples(["image-%09d"], count=5))  # from 0


def test_a_count_that_lies_is_refused_naming_the_file_and_key(tmp_path, small):
    path = create_lmdb_dataset(str(tmp_path / "lies"), small, num_samples=12)
    with pytest.raises(KeyError, match=f"{path}: no key b'image-000000012', which sample 11 needs: the "
                                       "count record 'num-samples' says 12 samples"):
        lmdbloader.LmdbDataset(path, samples="ocr", decode="raw")
    with pytest.raises(KeyError, match="no key b'image-000000011', which sample 10 needs: count=11"):
        lmdbloader.LmdbDataset(path, samples=lmdbloader.KeyedSamples(["image-%09d"], count=11, start=1))
    # Fewer than the records present: refused too when the record says so,
    # read on purpose when count= is an int.
    low = create_lmdb_dataset(str(tmp_path / "low"), small, num_samples=8)
    with pytest.raises(ValueError, match=rf"{low}: the count record 'num-samples' says 8 samples, yet key "
                                         rf"b'image-000000009' \(sample 8\) is present"):
        lmdbloader.LmdbDataset(low, samples="ocr")
    fewer = lmdbloader.KeyedSamples(["image-{:09d}", "label-{:09d}"], count=8, start=1, text=[1])
    ds = lmdbloader.LmdbDataset(low, samples=fewer, decode="raw")
    assert len(ds) == 8
    assert [ds[i] for i in range(8)] == small[:8]


@pytest.mark.parametrize("count, error, message", [
    (None, KeyError, "has no count record 'num-samples'"),
    (b"", ValueError, "holds b'', not a decimal number"),
    (b"twelve", ValueError, "holds b'twelve', not a decimal number"),
    (b"-3", ValueError, "holds b'-3', not a decimal number"),
    (b"1e3", ValueError, "not a decimal number"),
])
def test_a_count_record_missing_or_not_a_number(tmp_path, small, count, error, message):
    path = create_lmdb_dataset(str(tmp_path / "count"), small)
    with lmdb.open(path, map_size=1 << 30, sync=False) as env, env.begin(write=True) as txn:
        if count is None:
            txn.delete(b"num-samples")
        else:
            txn.put(b"num-samples", count)
    with pytest.raises(error, match=f"{path}(: the count record 'num-samples')? .*{message}"):
        lmdbloader.LmdbDataset(path, samples="ocr")


def test_a_count_record_with_a_newline_is_read_as_int_reads_it(tmp_path, small):
    path = create_lmdb_dataset(str(tmp_path / "newline"), small)
    with lmdb.open(path, map_size=1 << 30, sync=False) as env, env.begin(write=True) as txn:
        txn.put(b"num-samples", b"10\n")
    assert len(lmdbloader.LmdbDataset(path, samples="ocr")) == 10


def test_a_label_that_is_not_utf8_names_the_record_and_file(tmp_path, small):
    path = create_lmdb_dataset(str(tmp_path / "latin1"), small)
    with lmdb.open(path, map_size=1 << 30, sync=False) as env, env.begin(write=True) as txn:
        txn.put(b"label-000000004", "café".encode("latin-1"))
    ds = lmdbloader.LmdbDataset(path, samples="ocr", decode="raw")
    position = lmdbloader.Reader(path).index_of(b"label-000000004")
    with pytest.raises(lmdbloader.DecodeError, match=f"record {position} of {path} "
                                                     r"\(key b'label-000000004'\): not UTF-8 text"):
        ds[3]
    assert ds[4] == small[4]


def test_bad_patterns_and_options_are_refused(ocr):
    path, _ = ocr
    with pytest.raises(ValueError, match="'num-samples' has no number field"):
        lmdbloader.KeyedSamples(["num-samples"], count=1)
    with pytest.raises(ValueError, match="gives the same key for every sample"):
        lmdbloader.KeyedSamples(["a{!s:.0}"], count=1)
    with pytest.raises(ValueError, match="does not format one integer"):
        lmdbloader.KeyedSamples(["{}-{}"], count=1)
    with pytest.raises(ValueError, match="does not format one integer"):
        lmdbloader.KeyedSamples(["%s-%s"], count=1)
    with pytest.raises(TypeError, match="sequence of key patterns"):
        lmdbloader.KeyedSamples("image-{:09d}", count=1)
    with pytest.raises(TypeError, match="str or bytes"):
        lmdbloader.KeyedSamples([3], count=1)
    with pytest.raises(ValueError, match="after the first, which goes through decode="):
        lmdbloader.KeyedSamples(["a{}", "b{}"], count=1, text=[0])
    with pytest.raises(ValueError, match="start must be at least 0"):
        lmdbloader.KeyedSamples(["a{}"], count=1, start=-1)
    with pytest.raises(ValueError, match="at least 0"):
        lmdbloader.KeyedSamples(["a{}"], count=-1)
    with pytest.raises(TypeError, match="count"):
        lmdbloader.KeyedSamples(["a{}"], count=2.0)
    with pytest.raises(ValueError, match="samples must be a KeyedSamples or one of 'ocr'"):
        lmdbloader.LmdbDataset(path, samples="OCR")
    with pytest.raises(ValueError, match="does not combine with keys="):
        lmdbloader.LmdbDataset(path, samples="ocr", keys=["image-000000001"])
    with pytest.raises(ValueError, match="does not combine with targets="):
        lmdbloader.LmdbDataset(path, samples="ocr", targets=np.zeros(SAMPLES))


def test_the_ocr_preset_is_the_keyed_samples_it_names():
    preset = lmdbloader.samples.PRESETS["ocr"]
    assert preset.patterns == ("image-{:09d}", "label-{:09d}") and preset.count == "num-samples"
    assert preset.start == 1 and preset.text == (1,)
    assert preset.key(0) == b"image-000000001" and preset.key(1234, 1) == b"label-000001235"
    odd = lmdbloader.KeyedSamples(["{:>5d}%", "k{0:x}"], count=1)  # neither is a plain decimal field
    assert odd.key(10) == b"   10%" and odd.key(255, 1) == b"kff"
