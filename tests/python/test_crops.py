"""ImageDecode(crops=[Crop(...), ...]): several crops of each image from one
decode. Each crop is ImageDecode's with the Crop's options and the same
draws (bit for bit where the image is decoded at the scale ImageDecode
picks), torchvision's per-crop pipeline seeded alike within 2 levels on
average, and DINOv2's recipe comes through lmdbloader.DataLoader under
every start method.

Run with -s to see the measured differences."""

import io

import numpy as np
import pytest
import torch

import lmdbloader
from lmdbloader import vision
from synthetic_photos import image_folder_corpus, jpeg, photo
from torchvision_cpu import import_torchvision

PIL = pytest.importorskip("PIL")
from PIL import Image  # noqa: E402

skimage_data = pytest.importorskip("skimage.data")
import_torchvision()
import torchvision.transforms as T  # noqa: E402

JITTER = dict(jitter=(0.4, 0.4, 0.2, 0.1), jitter_p=0.8, gray_p=0.2)
GLOBAL = dict(scale=(0.32, 1.0), **JITTER)


def dinov2_crops(global_size=224, local_size=96, locals_=8):
    """DINOv2's multi-crop: global crop 1 (blur always), global crop 2 (blur
    0.1, solarize 0.2), the local crops (blur 0.5), each a Crop."""
    return [lmdbloader.Crop(global_size, **GLOBAL, blur_p=1.0),
            lmdbloader.Crop(global_size, **GLOBAL, blur_p=0.1, solarize_p=0.2),
            lmdbloader.Crop(local_size, n=locals_, scale=(0.05, 0.32), **JITTER, blur_p=0.5)]


def crop_options(group):
    c = group.colour
    return dict(scale=group.scale, ratio=group.ratio, flip=group.flip, jitter=c.jitter, jitter_p=c.jitter_p,
                gray_p=c.gray_p, blur_p=c.blur_p, blur_sigma=c.blur_sigma, blur_kernel=c.blur_kernel,
                solarize_p=c.solarize_p, solarize_threshold=c.solarize_threshold)


def torchvision_crop(group):
    """torchvision's per-crop pipeline for a Crop on PIL images, drawing as
    ImageDecode draws (a RandomApply of probability 1 is the transform alone)."""
    c = group.colour
    steps = [T.RandomResizedCrop(group.size, scale=group.scale, ratio=group.ratio,
                                 interpolation=T.InterpolationMode.BICUBIC, antialias=True),
             T.RandomHorizontalFlip(group.flip)]
    if c.jitter is not None:
        steps.append(T.RandomApply([T.ColorJitter(*c.jitter)], p=c.jitter_p))
    if c.gray_p:
        steps.append(T.RandomGrayscale(c.gray_p))
    if c.blur_p:
        blur = T.GaussianBlur(c.blur_kernel, c.blur_sigma)
        steps.append(blur if c.blur_p == 1 else T.RandomApply([blur], p=c.blur_p))
    if c.solarize_p:
        steps.append(T.RandomSolarize(c.solarize_threshold, c.solarize_p))
    return T.Compose(steps)


def skimage_photo(name, longer):
    img = Image.fromarray(getattr(skimage_data, name)())
    s = longer / max(img.size)
    return img.resize((round(img.width * s), round(img.height * s)), Image.BICUBIC)


def sources(longer):
    """A landscape, a portrait, a gray and an Adobe CMYK photograph, as JPEGs."""
    out = [("landscape", skimage_photo("chelsea", longer)),
           ("portrait", skimage_photo("coffee", longer).transpose(Image.Transpose.ROTATE_90)),
           ("gray", skimage_photo("camera", longer).convert("L")),
           ("cmyk", skimage_photo("astronaut", longer).convert("CMYK"))]
    encoded = []
    for name, img in out:
        b = io.BytesIO()
        img.save(b, "JPEG", quality=90)
        encoded.append((name, b.getvalue()))
    return encoded


def levels(a, b):
    return float(np.abs(np.asarray(a, np.int16) - np.asarray(b, np.int16)).mean())


@pytest.mark.parametrize("dtype,layout", [(torch.float32, "CHW"), (torch.uint8, "HWC")])
def test_each_crop_is_image_decode_with_its_crop_options(dtype, layout):
    """Images of 100 px: no crop alone is shrunk in the IDCT (no box is
    twice its output), so the one decode gives each crop exactly
    ImageDecode's output."""
    groups = dinov2_crops(64, 40, locals_=4)
    common = dict(dtype=dtype, layout=layout, record="raw", interpolation="bicubic")
    decode = lmdbloader.ImageDecode(crops=groups, **common)
    alone = [lmdbloader.ImageDecode(v.size, **crop_options(v), **common) for v in groups]
    for name, data in sources(longer=100):
        for seed in range(4):
            torch.manual_seed(seed)
            got = decode(data)
            torch.manual_seed(seed)
            for group, single, crops in zip(groups, alone, got):
                assert crops.shape == group.shape(3, layout) and crops.dtype == dtype
                for j in range(group.n):
                    assert torch.equal(crops[j], single(data)), (name, seed, group, j)


def test_crops_are_torchvisions_per_crop_pipeline_seeded_alike():
    """DINOv2's recipe (bicubic) against torchvision's per-crop transforms on
    PIL images, one seed for both: the same draws, each crop within 2 levels
    of 255 on average (larger boxes are decoded smaller in the IDCT)."""
    groups = dinov2_crops(112, 48, locals_=4)
    decode = lmdbloader.ImageDecode(crops=groups, dtype=torch.uint8, layout="HWC", record="raw",
                                    interpolation="bicubic")
    recipes = [torchvision_crop(v) for v in groups]
    diffs = []
    for name, data in sources(longer=320):
        img = Image.open(io.BytesIO(data)).convert("RGB")
        for seed in range(6):
            torch.manual_seed(seed)
            got = decode(data)
            torch.manual_seed(seed)
            for group, recipe, crops in zip(groups, recipes, got):
                for j in range(group.n):
                    diffs.append(levels(crops[j].numpy(), recipe(img)))
                    assert diffs[-1] <= 6, (name, seed, group.size, j, diffs[-1])
            crops = sum(v.n for v in groups)
            print(f"{name} seed {seed}: mean {np.mean(diffs[-crops:]):.3f} levels over {crops} crops")
    print(f"all crops: mean {np.mean(diffs):.3f}, worst {max(diffs):.3f} levels")
    assert np.mean(diffs) <= 2


def test_other_formats_and_tiny_images_go_through_one_decode():
    """A PNG (decoded once by PIL) gives ImageDecode's crops; a 1x1 JPEG
    into 10 crops gives torchvision's (the pixel everywhere)."""
    png = io.BytesIO()
    photo(4, 150, 110).save(png, "PNG")
    groups = [lmdbloader.Crop(40, n=3, **JITTER), lmdbloader.Crop(24, n=2, blur_p=0.5)]
    decode = lmdbloader.ImageDecode(crops=groups, dtype=torch.uint8, record="raw")
    torch.manual_seed(5)
    got = decode(png.getvalue())
    torch.manual_seed(5)
    for group, crops in zip(groups, got):
        single = lmdbloader.ImageDecode(group.size, dtype=torch.uint8, record="raw", **crop_options(group))
        for j in range(group.n):
            assert torch.equal(crops[j], single(png.getvalue()))
    assert decode.stats()["pil"] == 1
    tiny = jpeg(Image.new("RGB", (1, 1), (200, 30, 90)))
    groups = [lmdbloader.Crop(16, n=10, **JITTER, blur_p=0.5, solarize_p=0.3)]
    decode = lmdbloader.ImageDecode(crops=groups, dtype=torch.uint8, layout="HWC", record="raw")
    img = Image.open(io.BytesIO(tiny)).convert("RGB")
    torch.manual_seed(1)
    got = decode(tiny)[0]
    torch.manual_seed(1)
    recipe = torchvision_crop(groups[0])
    for j in range(10):
        assert np.array_equal(got[j].numpy(), np.asarray(recipe(img))), j


def test_bad_crops_are_refused():
    group = lmdbloader.Crop(32)
    for kwargs, message in [
            (dict(crops=[]), "non-empty list of lmdbloader.Crop"),
            (dict(crops=group), "non-empty list of lmdbloader.Crop"),
            (dict(crops=[group, "x"]), "non-empty list of lmdbloader.Crop"),
            (dict(crops=[lmdbloader.Crop(32, n=40), lmdbloader.Crop(16, n=25)]),
             "65 crops from each image; at most 64"),
            (dict(crops=[group], train=False), "takes no train=False"),
            (dict(size=32, crops=[group]), "a size or crops, not both"),
            (dict(crops=[group], scale=(0.5, 1.0), jitter=(0.4, 0.4, 0.4)), "scale, jitter belong to each Crop")]:
        with pytest.raises(ValueError, match=message):
            lmdbloader.ImageDecode(**kwargs)
    for kwargs, message in [(dict(size=32, n=0), "n \\(crops of each image\\) must be an integer from 1 to 64"),
                            (dict(size=32, n=65), "from 1 to 64"), (dict(size=32, n=True), "from 1 to 64"),
                            (dict(size=0), "Crop size must be"), (dict(size=(32, 99999)), "Crop size must be"),
                            (dict(size=32, scale=(0.5, 1.5)), "Crop scale must lie in"),
                            (dict(size=32, scale=(0.0, 1.0)), "Crop scale must be"),
                            (dict(size=32, ratio=(2.0, 1.0)), "Crop ratio"),
                            (dict(size=32, flip=2), "Crop flip"), (dict(size=32, jitter=(1,)), "jitter must be"),
                            (dict(size=32, blur_kernel=4), "blur_kernel must be an odd")]:
        with pytest.raises(ValueError, match=message):
            lmdbloader.Crop(**kwargs)
    with pytest.raises(ValueError, match="ClipDecode takes no crops"):
        lmdbloader.ClipDecode(32, crops=[group])
    with pytest.raises(ValueError, match="size"):
        lmdbloader.ImageDecode()
    decode = lmdbloader.ImageDecode(crops=[group], record="raw")
    with pytest.raises(lmdbloader.DecodeError, match="image 0 of the batch"):
        decode(b"\xff\xd8\xff\xe0 not a whole jpeg")
    with pytest.raises(ValueError, match="one contiguous torch.float32 tensor"):
        decode.decode_records([jpeg(photo(1, 40, 30))], out=[torch.empty(1, 1, 3, 32, 32, dtype=torch.uint8)])


def test_the_former_names_still_work_with_a_warning_that_names_the_new_ones():
    """View and ImageDecode(views=...), the former names of Crop and crops=:
    the same decoder, with a DeprecationWarning pointing at the caller's
    line (Python shows those); both names at once are refused."""
    with pytest.warns(DeprecationWarning, match=r"is now ImageDecode\(crops=\[Crop\(\.\.\.\)\]\)") as caught:
        former = lmdbloader.View
    assert former is lmdbloader.Crop and caught[0].filename == __file__
    with pytest.warns(DeprecationWarning, match="a view is a zero-copy read"):
        from lmdbloader.vision import View  # noqa: F401
    with pytest.warns(DeprecationWarning, match="former names") as caught:
        old = lmdbloader.ImageDecode(views=[lmdbloader.Crop(32, n=2, **JITTER)], dtype=torch.uint8, record="raw")
    assert caught[0].filename == __file__
    new = lmdbloader.ImageDecode(crops=[lmdbloader.Crop(32, n=2, **JITTER)], dtype=torch.uint8, record="raw")
    data = jpeg(photo(2, 60, 50))
    torch.manual_seed(4)
    a = old(data)
    torch.manual_seed(4)
    assert all(torch.equal(x, y) for x, y in zip(a, new(data)))
    with pytest.raises(ValueError, match="crops= alone"):
        lmdbloader.ImageDecode(crops=[lmdbloader.Crop(32)], views=[lmdbloader.Crop(32)])
    with pytest.raises(AttributeError, match="no attribute 'Views'"):
        vision.Views  # noqa: B018


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """8 small JPEG records {image, label}, as `convert --from image_folder` writes them."""
    images = [jpeg(photo(i, 120 + 17 * i, 100 + 9 * i), progressive=i == 3) for i in range(8)]
    return image_folder_corpus(tmp_path_factory.mktemp("crops"), images, classes=2)


def seed_workers(worker_id):
    torch.manual_seed(31 + worker_id)


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_dinov2_through_the_dataloader(corpus, method):
    """DINOv2's recipe: a batch is [[global 1, global 2, locals], labels],
    (B, n, C, H, W) each, straight into the ring; a plain DataLoader with
    torch's default_collate, seeded alike, gives the same batches."""
    decode = lmdbloader.ImageDecode(crops=dinov2_crops(), interpolation="bicubic")
    ds = lmdbloader.LmdbDataset(corpus, decode=decode)
    common = dict(batch_size=4, num_workers=2, worker_init_fn=seed_workers, multiprocessing_context=method)
    loader = lmdbloader.DataLoader(ds, **common)
    got = [([v.clone() for v in groups], y.clone()) for groups, y in loader]
    # The reference forks whatever the method: its samples follow the
    # workers' seeds alone (two more interpreters would only slow the test).
    plain = list(torch.utils.data.DataLoader(ds, **{**common, "multiprocessing_context": "fork"}))
    assert len(got) == len(plain) == 2
    for (groups, y), (pgroups, py) in zip(got, plain):
        assert isinstance(groups, list) and len(groups) == 3 and y.shape == (4,) and y.dtype == torch.int64
        assert [tuple(v.shape) for v in groups] == [(4, 1, 3, 224, 224), (4, 1, 3, 224, 224), (4, 8, 3, 96, 96)]
        assert all(v.dtype == torch.float32 for v in groups)
        assert all(torch.equal(a, b) for a, b in zip(groups, pgroups)) and torch.equal(y, py)
    assert loader.ring_stats()["in_ring"] >= 1
    # DINOv2's collate order, crop-major: every image's first local crop, then the second, ...
    locals_ = got[0][0][2].transpose(0, 1).flatten(0, 1)
    assert locals_.shape == (32, 3, 96, 96) and torch.equal(locals_[4], got[0][0][2][0, 1])


def test_getitem_is_the_dataloaders_sample(corpus):
    decode = lmdbloader.ImageDecode(crops=dinov2_crops(48, 24, locals_=2), dtype=torch.uint8)
    ds = lmdbloader.LmdbDataset(corpus, decode=decode)
    torch.manual_seed(3)
    samples = [ds[i] for i in range(4)]
    batches = iter(lmdbloader.DataLoader(ds, batch_size=4))  # draws its base seed
    torch.manual_seed(3)
    groups, y = next(batches)
    for i, (crops, label) in enumerate(samples):
        assert isinstance(crops, tuple) and len(crops) == 3 and y[i] == label
        assert all(torch.equal(c, v[i]) for c, v in zip(crops, groups))


@pytest.mark.parametrize("multi_crop", [True, False])
def test_a_resumed_stateful_loader_draws_what_the_whole_run_drew(corpus, multi_crop):
    """torchdata's StatefulDataLoader stopped after 3 of 8 batches and resumed
    from its state_dict gives the uninterrupted run's crops, flips and colour
    (the workers' torch generators travel in LmdbDataset.state_dict), not
    just its order."""
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    decode = (lmdbloader.ImageDecode(crops=dinov2_crops(32, 16, locals_=2), dtype=torch.uint8) if multi_crop else
              lmdbloader.ImageDecode(24, dtype=torch.uint8, jitter=(0.4, 0.4, 0.2, 0.1)))
    ds = lmdbloader.LmdbDataset(corpus, decode=decode)

    def make():
        torch.manual_seed(7)  # the loader's base seed, as a training script sets it
        return stateful.StatefulDataLoader(ds, batch_size=1, num_workers=2, shuffle=True,
                                           collate_fn=lmdbloader.collate)

    def tensors(batch):
        images, labels = batch
        return [v.clone() for v in images] if multi_crop else [images.clone()], labels.clone()

    whole = [tensors(b) for b in make()]
    first = make()
    it = iter(first)
    head = [tensors(b) for _, b in zip(range(3), it)]
    state = first.state_dict()
    del it, first
    resumed = make()
    resumed.load_state_dict(state)
    tail = [tensors(b) for b in resumed]
    assert len(head + tail) == len(whole) == 8
    for (images, labels), (want, want_labels) in zip(head + tail, whole):
        assert torch.equal(labels, want_labels)
        assert all(torch.equal(a, b) for a, b in zip(images, want))
    # A state without a generator changes nothing; what is not a state is refused.
    ds.load_state_dict({"torch_rng_state": None})
    with pytest.raises(TypeError, match="state_dict"):
        ds.load_state_dict([1])
