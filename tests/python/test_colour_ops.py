"""ImageDecode's colour ops (jitter, gray_p, solarize_p) against torchvision's
transforms on PIL images of photographs (scikit-image's): each op alone
through apply_colour against torchvision.transforms.functional, and the
whole recipe seeded alike against torchvision's Compose.

Run with -s to see the measured differences."""

import io

import numpy as np
import pytest
import torch
from PIL import Image

import lmdbloader
from lmdbloader import vision

from synthetic_photos import image_folder_corpus
from torchvision_cpu import import_torchvision

skimage_data = pytest.importorskip("skimage.data")
import_torchvision()
import torchvision.transforms as T  # noqa: E402
from torchvision.transforms import functional as F  # noqa: E402

PHOTOS = ("astronaut", "chelsea", "coffee", "rocket", "immunohistochemistry")
DINO = dict(jitter=(0.4, 0.4, 0.2, 0.1), jitter_p=0.8, gray_p=0.2, solarize_p=0.2)


def photo(name, longer=320):
    img = Image.fromarray(getattr(skimage_data, name)())
    s = longer / max(img.size)
    return img.resize((round(img.width * s), round(img.height * s)), Image.BICUBIC)


def encode(img):
    b = io.BytesIO()
    img.save(b, "JPEG", quality=90)
    return b.getvalue()


def mean_levels(a, b):
    return float(np.abs(np.asarray(a, np.int16) - np.asarray(b, np.int16)).mean())


def torchvision_op(img, name, value):
    if name == "brightness":
        return F.adjust_brightness(img, value)
    if name == "contrast":
        return F.adjust_contrast(img, value)
    if name == "saturation":
        return F.adjust_saturation(img, value)
    if name == "hue":
        return F.adjust_hue(img, value)
    if name == "grayscale":
        return F.rgb_to_grayscale(img, num_output_channels=3)
    return F.solarize(img, value)


OPS = [("brightness", f) for f in (0.0, 0.6, 1.0, 1.37, 2.5)] + \
      [("contrast", f) for f in (0.0, 0.6, 1.0, 1.37, 2.5)] + \
      [("saturation", f) for f in (0.0, 0.8, 1.0, 1.2, 3.0)] + \
      [("hue", f) for f in (-0.5, -0.23, 0.0, 0.1, 0.5)] + \
      [("grayscale", 0.0), ("solarize", 128.0), ("solarize", 64.5), ("solarize", 0.0)]


@pytest.mark.parametrize("name,value", OPS, ids=[f"{n}-{v}" for n, v in OPS])
def test_each_op_is_torchvisions_on_pil_images(name, value):
    worst = 0.0
    for p in PHOTOS:
        img = photo(p)
        got = vision.apply_colour(np.asarray(img), [(name, value)])
        want = np.asarray(torchvision_op(img, name, value))
        worst = max(worst, mean_levels(got, want))
        assert np.abs(got.astype(int) - want).max() <= 1, (p, name, value)
    print(f"{name} {value}: mean difference {worst:.4f} levels (worst photo)")
    assert worst <= 2


@pytest.mark.parametrize("factor", [-0.5, -0.3137, -0.1, 0.05, 0.25, 0.49])
def test_hue_is_pils_hsv_round_trip_for_every_colour(factor):
    """All 2^24 colours through adjust_hue: PIL's rgb2hsv and hsv2rgb are
    float arithmetic, so this checks every rounding, not a sample."""
    v = np.arange(1 << 24, dtype=np.uint32)
    every = np.stack([v >> 16, (v >> 8) & 255, v & 255], axis=1).astype(np.uint8).reshape(4096, 4096, 3)
    got = vision.apply_colour(every, [("hue", factor)])
    want = np.asarray(F.adjust_hue(Image.fromarray(every), factor))
    differ = np.count_nonzero(np.any(got != want, axis=2))
    print(f"hue {factor}: {differ} of 2^24 colours differ")
    assert differ == 0


def test_one_channel_ops_are_torchvisions_on_l_images():
    img = photo("camera")
    for name, value in [("brightness", 1.3), ("contrast", 0.7), ("solarize", 100.0), ("hue", 0.3)]:
        got = vision.apply_colour(np.asarray(img), [(name, value)])
        assert mean_levels(got, np.asarray(torchvision_op(img, name, value))) <= 0.01, name
    assert np.array_equal(vision.apply_colour(np.asarray(img), [("saturation", 0.3), ("grayscale", 0)]),
                          np.asarray(img))


def torchvision_dino(size):
    return T.Compose([T.RandomResizedCrop(size, antialias=True), T.RandomHorizontalFlip(),
                      T.RandomApply([T.ColorJitter(0.4, 0.4, 0.2, 0.1)], p=0.8), T.RandomGrayscale(0.2),
                      T.RandomSolarize(128, p=0.2)])


def sources():
    out = [(p, photo(p)) for p in PHOTOS]
    out.append(("camera-gray", photo("camera").convert("L")))   # a 1-component JPEG
    out.append(("coffee-cmyk", photo("coffee").convert("CMYK")))  # an Adobe CMYK JPEG
    return [(n, encode(img)) for n, img in out]


@pytest.mark.parametrize("size", [224, 64], ids=["full-size", "idct-scaled"])
def test_the_recipe_is_torchvisions_compose_seeded_alike(size):
    """RandomResizedCrop, flip, RandomApply(ColorJitter), RandomGrayscale,
    RandomSolarize: the same draws from one seed, the images within 2
    levels on average. The ops are exact on a given crop; they carry the
    crop's own difference (boxes 3 times the output or more are decoded
    smaller in the IDCT: a third of a level, up to 1.2 on some crops), hue
    magnifying it a little where the saturation is low."""
    decode = lmdbloader.ImageDecode(size, dtype=torch.uint8, layout="HWC", record="raw", **DINO)
    plain = lmdbloader.ImageDecode(size, dtype=torch.uint8, layout="HWC", record="raw")
    recipe, crop = torchvision_dino(size), T.Compose([T.RandomResizedCrop(size, antialias=True),
                                                      T.RandomHorizontalFlip()])
    diffs, crops = [], []
    for name, data in sources():
        img = Image.open(io.BytesIO(data)).convert("RGB")
        for seed in range(12):
            torch.manual_seed(seed)
            got = decode(data).numpy()
            torch.manual_seed(seed)
            want = np.asarray(recipe(img))
            torch.manual_seed(seed)
            alone = plain(data).numpy()
            torch.manual_seed(seed)
            crops.append(mean_levels(alone, crop(img)))
            diffs.append(mean_levels(got, want))
            assert diffs[-1] <= 1.5 * crops[-1] + 0.5, (name, seed, diffs[-1], crops[-1])
            assert size != 224 or diffs[-1] <= 2, (name, seed, diffs[-1])
    print(f"recipe at {size}: ops on {np.mean(diffs):.4f} (worst {max(diffs):.4f}), "
          f"crop alone {np.mean(crops):.4f} (worst {max(crops):.4f}) levels")
    assert np.mean(diffs) <= 2


def test_float_output_is_the_uint8_output_normalized():
    data = encode(photo("chelsea"))
    u8 = lmdbloader.ImageDecode(96, dtype=torch.uint8, record="raw", **DINO)
    f32 = lmdbloader.ImageDecode(96, record="raw", **DINO)
    for seed in range(6):
        torch.manual_seed(seed)
        a = u8(data).float() / 255
        torch.manual_seed(seed)
        b = f32(data) * torch.tensor(f32.std).view(3, 1, 1) + torch.tensor(f32.mean).view(3, 1, 1)
        assert torch.allclose(a, b, atol=1e-5)


def test_probability_zero_is_no_op():
    data = encode(photo("astronaut"))
    plain = lmdbloader.ImageDecode(80, record="raw")
    off = lmdbloader.ImageDecode(80, record="raw", jitter=(0.4, 0.4, 0.2), jitter_p=0.0, gray_p=0.0, solarize_p=0.0)
    torch.manual_seed(3)
    a = torch.stack([plain(data) for _ in range(4)])
    torch.manual_seed(3)
    b = torch.stack([off(data) for _ in range(4)])
    assert torch.equal(a, b)
    always = lmdbloader.ImageDecode(80, record="raw", dtype=torch.uint8, gray_p=1.0, solarize_p=1.0,
                                    solarize_threshold=300)
    g = always(data)
    assert torch.equal(g[0], g[1]) and torch.equal(g[1], g[2]) and not torch.equal(g[0], plain(data)[0])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return image_folder_corpus(tmp_path_factory.mktemp("colour"), [data for _, data in sources() * 3], classes=2)


def seed_workers(worker_id):
    torch.manual_seed(123 + worker_id)


def test_a_seeded_dataloader_run_repeats(corpus):
    ds = lmdbloader.LmdbDataset(corpus, decode=lmdbloader.ImageDecode(64, **DINO))
    runs = []
    for _ in range(2):
        loader = lmdbloader.DataLoader(ds, batch_size=7, num_workers=2, worker_init_fn=seed_workers)
        runs.append(torch.cat([x for x, _ in loader]))
    assert torch.equal(runs[0], runs[1])
    plain = lmdbloader.LmdbDataset(corpus, decode=lmdbloader.ImageDecode(64))
    loader = lmdbloader.DataLoader(plain, batch_size=7, num_workers=2, worker_init_fn=seed_workers)
    assert not torch.equal(runs[0], torch.cat([x for x, _ in loader]))  # the ops did something


@pytest.mark.parametrize("options,match", [
    (dict(gray_p=1.5), "gray_p"), (dict(gray_p=-0.1), "gray_p"), (dict(jitter=(0.4, 0.4, 0.2), jitter_p=2), "jitter_p"),
    (dict(solarize_p=True), "solarize_p"), (dict(solarize_threshold=float("nan")), "solarize_threshold"),
    (dict(jitter=(-0.1, 0, 0)), "brightness"), (dict(jitter=(0, (1.2, 0.8), 0)), "contrast"),
    (dict(jitter=(0, 0, "x")), "saturation"), (dict(jitter=(0.4, 0.4)), "jitter"),
    (dict(jitter=(0.4, 0.4, 0.2, 0.6)), "hue"),
])
def test_bad_parameters_raise_value_error_naming_the_option(options, match):
    with pytest.raises(ValueError, match=match):
        lmdbloader.ImageDecode(32, **options)


def test_bad_ops_given_to_apply_colour_raise_value_error():
    pixels = np.zeros((4, 4, 3), np.uint8)
    for ops, match in [([("sharpness", 0.1)], "colour op must be one of brightness"), ([("hue", 0.7)], "hue"), ([("contrast", -1)], "contrast"),
                       ([("solarize", float("inf"))], "solarize")]:
        with pytest.raises(ValueError, match=match):
            vision.apply_colour(pixels, ops)
    with pytest.raises(ValueError, match="uint8"):
        lmdbloader._core.apply_colour(np.zeros((4, 4, 2), np.uint8), [])


def test_grayscale_output_takes_the_ops_as_torchvision_does_on_l_images():
    """grayscale=True (torchvision's Grayscale first): the ops on one
    channel, saturation and RandomGrayscale leaving it as it is; the luma is
    the JPEG's Y (vision.py)."""
    data = encode(photo("coffee"))
    decode = lmdbloader.ImageDecode(224, grayscale=True, dtype=torch.uint8, record="raw", **DINO)
    recipe = T.Compose([T.Grayscale(), torchvision_dino(224)])
    for seed in range(8):
        torch.manual_seed(seed)
        got = decode(data)[0].numpy()
        torch.manual_seed(seed)
        want = np.asarray(recipe(Image.open(io.BytesIO(data)).convert("RGB")))
        # The JPEG's own luma, not PIL's L of its RGB: apart where coffee's
        # saturated colours clip (measured 0.0504 at most over these seeds).
        assert mean_levels(got, want) <= 0.25, seed


def test_other_formats_clips_and_padded_crops_take_the_ops():
    """A PNG (decoded by PIL, resized by the same code) gets torchvision's
    result; a clip's frames share one draw; an eval crop that CenterCrop
    pads is changed without its padding (documented)."""
    img = photo("chelsea")
    png = io.BytesIO()
    img.save(png, "PNG")
    decode = lmdbloader.ImageDecode(224, dtype=torch.uint8, layout="HWC", record="raw", **DINO)
    for seed in range(6):
        torch.manual_seed(seed)
        got = decode(png.getvalue()).numpy()
        torch.manual_seed(seed)
        assert mean_levels(got, np.asarray(torchvision_dino(224)(img))) <= 0.05, seed
    frame = encode(img)
    clip = lmdbloader.ClipDecode(64, frames=3, dtype=torch.uint8, record=lambda r: [frame] * 3, **DINO)
    for seed in range(4):
        torch.manual_seed(seed)
        frames = clip(b"")
        assert torch.equal(frames[0], frames[1]) and torch.equal(frames[1], frames[2])
    padded = lmdbloader.ImageDecode(400, train=False, resize=300, dtype=torch.uint8, record="raw", gray_p=1.0)
    out = padded(frame)
    assert out.shape == (3, 400, 400) and torch.equal(out[0], out[1]) and int(out[:, 0, 0].max()) == 0


@pytest.mark.parametrize("kernel,sigma", [(9, 0.1), (9, 1.0), (9, 2.0), (3, 0.7), (23, 3.3)])
def test_blur_is_torchvisions_gaussian_blur_on_pil_images(kernel, sigma):
    """torchvision blurs a PIL image as a tensor: a k x k float32 Gaussian,
    reflect padding, levels rounded half to even. Separable here, so a
    level that lands on .5 may round the other way: at most 1 level, on a
    few pixels."""
    for name in PHOTOS:
        img = photo(name, 200)
        want = np.asarray(F.gaussian_blur(img, [kernel, kernel], [sigma, sigma]))
        got = vision.apply_colour(np.asarray(img), [("blur", sigma, kernel)])
        diff = np.abs(got.astype(np.int16) - want.astype(np.int16))
        assert diff.max() <= 1 and diff.mean() < 0.001, (name, diff.max(), diff.mean())
    gray = photo("camera", 100).convert("L")
    want = np.asarray(F.gaussian_blur(gray, [kernel, kernel], [sigma, sigma]))
    assert np.abs(vision.apply_colour(np.asarray(gray), [("blur", sigma, kernel)]).astype(np.int16) - want).max() <= 1


def test_blur_in_the_recipe_draws_as_torchvision_does():
    """DINOv2's first global crop: crop, flip, RandomApply(ColorJitter),
    RandomGrayscale, GaussianBlur (always), from one seed alike."""
    decode = lmdbloader.ImageDecode(224, dtype=torch.uint8, layout="HWC", record="raw", scale=(0.32, 1.0),
                                    jitter=(0.4, 0.4, 0.2, 0.1), jitter_p=0.8, gray_p=0.2, blur_p=1.0)
    recipe = T.Compose([T.RandomResizedCrop(224, scale=(0.32, 1.0), antialias=True), T.RandomHorizontalFlip(),
                        T.RandomApply([T.ColorJitter(0.4, 0.4, 0.2, 0.1)], p=0.8), T.RandomGrayscale(0.2),
                        T.GaussianBlur(9, sigma=(0.1, 2.0))])
    diffs = []
    for name, data in sources()[:4]:
        img = Image.open(io.BytesIO(data)).convert("RGB")
        for seed in range(6):
            torch.manual_seed(seed)
            got = decode(data).numpy()
            torch.manual_seed(seed)
            diffs.append(mean_levels(got, recipe(img)))
    assert np.mean(diffs) <= 2 and max(diffs) <= 3, diffs
    # A tiny output blurs with a kernel torch's reflect padding takes (kernel // 2 below each side).
    assert lmdbloader.ImageDecode(4, record="raw", blur_p=1.0, blur_kernel=7)(sources()[0][1]).shape == (3, 4, 4)
    with pytest.raises(ValueError, match="blur_kernel 9 is too large for the 4x4 images"):
        lmdbloader.ImageDecode(4, record="raw", blur_p=1.0, blur_kernel=9)


@pytest.mark.parametrize("options,match", [
    (dict(blur_p=1.2), "blur_p"), (dict(blur_kernel=4), "blur_kernel"), (dict(blur_kernel=0), "blur_kernel"),
    (dict(blur_kernel=257), "blur_kernel"), (dict(blur_sigma=0), "blur_sigma"), (dict(blur_sigma=(2.0, 1.0)), "blur_sigma"),
    (dict(blur_sigma=(0.1, float("inf"))), "blur_sigma"),
])
def test_bad_blur_parameters_raise_value_error_naming_the_option(options, match):
    with pytest.raises(ValueError, match=match):
        lmdbloader.ImageDecode(32, **options)
    with pytest.raises(ValueError, match="blur"):
        vision.apply_colour(np.zeros((4, 4, 3), np.uint8), [("blur", 1.0, 4)])
    with pytest.raises(ValueError, match="blur is"):
        vision.apply_colour(np.zeros((4, 4, 3), np.uint8), [("blur", 1.0)])
