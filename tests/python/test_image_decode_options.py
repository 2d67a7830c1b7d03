"""The float options of ImageDecode, ClipDecode and Crop against torchvision's
rules for the same transforms: a value torchvision refuses, or accepts only
to fail at every draw (torch's ``uniform_`` past float32's range), is refused
when the decoder is made, by a ValueError naming the option and the value;
the edges torchvision draws from are accepted and decode. A blur kernel is
held to torch's reflect padding, kernel // 2 below both sides of the image
it blurs."""

import io
import math

import numpy as np
import pytest
import torch
from PIL import Image

import lmdbloader
from lmdbloader import _core, vision

from torchvision_cpu import import_torchvision

import_torchvision()
import torchvision.transforms as T  # noqa: E402
from torchvision.transforms import functional as F  # noqa: E402

INF, NAN = math.inf, math.nan
F32_MAX = float(np.finfo(np.float32).max)
MAX_SIDE = _core.image_options()["max_side"]


def jpeg(width=40, height=30):
    rng = np.random.default_rng(width * 1000 + height)
    b = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(b, "JPEG", quality=90)
    return b.getvalue()


BAD = [
    # ColorJitter: ends past float32's range fail every draw in torchvision.
    (dict(jitter=((0, INF), 0, 0)), "brightness", "inf"), (dict(jitter=(1e39, 0, 0)), "brightness", "1e\\+39"),
    (dict(jitter=(0, (0, 1e39), 0)), "contrast", "1e\\+39"), (dict(jitter=(0, 0, INF)), "saturation", "inf"),
    (dict(jitter=(0, 0, (NAN, 1))), "saturation", "nan"), (dict(jitter=(0, 0, 0, NAN)), "hue", "nan"),
    (dict(jitter=(0, 0, 0, (-0.6, 0))), "hue", "-0.6"), (dict(jitter=(0, INF)), "jitter", "inf"),
    # RandomResizedCrop: log and exp of the ratio in float32; a ratio whose crops are all empty.
    (dict(ratio=(3 / 4, 1e39)), "ratio", "1e\\+39"), (dict(ratio=(3 / 4, INF)), "ratio", "inf"),
    (dict(ratio=(3 / 4, F32_MAX)), "ratio", "3.40282"), (dict(ratio=(1e-46, 1)), "ratio", "1e-46"),
    (dict(ratio=(1e6, 1e6)), "ratio", "every crop empty"), (dict(ratio=(1e-6, 1e-6)), "ratio", "every crop empty"),
    (dict(ratio=(NAN, 1)), "ratio", "nan"), (dict(scale=(0.08, NAN)), "scale", "nan"),
    (dict(scale=(-INF, 1)), "scale", "inf"),
    # GaussianBlur: sigma drawn by uniform_ in float32 (1e-50 would draw 0: a kernel of nan).
    (dict(blur_sigma=1e300), "blur_sigma", "1e\\+300"), (dict(blur_sigma=(0.1, 1e39)), "blur_sigma", "1e\\+39"),
    (dict(blur_sigma=INF), "blur_sigma", "inf"), (dict(blur_sigma=(1e-50, 1)), "blur_sigma", "1e-50"),
    (dict(blur_sigma=NAN), "blur_sigma", "nan"),
    # RandomSolarize: any number, within what the core holds.
    (dict(solarize_threshold=1e300), "solarize_threshold", "1e\\+300"),
    (dict(solarize_threshold=-INF), "solarize_threshold", "inf"),
    # timm's crop_pct: the shorter side it resizes to must be one the decoder makes.
    (dict(crop_pct=1e-9, train=False), "crop_pct", "1e-09"), (dict(crop_pct=1e-9), "crop_pct", "1e-09"),
    (dict(crop_pct=NAN, train=False), "crop_pct", "nan"),
    # Normalize: what the core computes in float32 stays finite.
    (dict(mean=(1e39, 0, 0)), "mean", "1e\\+39"), (dict(mean=(1e38, 0, 0)), "mean", "1e\\+38"),
    (dict(std=(1e-300, 1, 1)), "std", "1e-300"),
    (dict(std=(1e-42, 1, 1)), "std", "1e-42"), (dict(std=(INF, 1, 1)), "std", "inf"),
]


@pytest.mark.parametrize("options,name,value", BAD, ids=[f"{n}-{i}" for i, (_, n, _) in enumerate(BAD)])
def test_a_bad_value_is_refused_naming_the_option_and_the_value(options, name, value):
    with pytest.raises(ValueError, match=name) as e:
        lmdbloader.ImageDecode(32, **options)
    assert e.match(value), str(e.value)
    if "mean" in options or "std" in options:
        return
    per_crop = {k: v for k, v in options.items() if k not in ("crop_pct", "train")}
    if per_crop:
        with pytest.raises(ValueError, match=name):
            lmdbloader.Crop(32, **per_crop)
    with pytest.raises(ValueError, match=name):
        lmdbloader.ClipDecode(32, frames=2, **options)


@pytest.mark.parametrize("transform,image", [
    (lambda: T.ColorJitter(brightness=(0, INF)), "pil"), (lambda: T.ColorJitter(contrast=1e39), "pil"),
    (lambda: T.RandomResizedCrop(16, ratio=(3 / 4, 1e39)), "pil"),
    (lambda: T.RandomResizedCrop(16, ratio=(1e-46, 1)), "pil"),
    (lambda: T.GaussianBlur(9, sigma=(0.1, 1e39)), "pil"), (lambda: T.GaussianBlur(255, sigma=1.0), "pil"),
])
def test_torchvision_fails_on_what_is_refused(transform, image):
    """Each refusal above stands for a failure torchvision meets too, only
    later: its draw (or its padding) raises at every image."""
    img = Image.open(io.BytesIO(jpeg(40, 30))).convert("RGB")
    with pytest.raises((RuntimeError, ValueError, OverflowError)):
        transform()(img)


@pytest.mark.parametrize("transform", [
    lambda: T.ColorJitter(brightness=(0, F32_MAX), contrast=0, saturation=F32_MAX - 1, hue=(-0.5, 0.5)),
    lambda: T.ColorJitter(0.4, 0.4, 0.2, 0.5), lambda: T.RandomResizedCrop(16, scale=(0.08, 1), ratio=(1e-45, 1e38)),
    lambda: T.GaussianBlur(9, sigma=(1e-45, 1e38)), lambda: T.GaussianBlur(9, sigma=F32_MAX),
    lambda: T.RandomSolarize(300, p=1.0), lambda: T.RandomSolarize(-F32_MAX, p=1.0),
])
def test_torchvision_draws_from_what_is_accepted(transform):
    """The edges accepted below are values torchvision draws from without
    an error, image after image."""
    img = Image.open(io.BytesIO(jpeg(40, 30))).convert("RGB")
    t = transform()
    for seed in range(20):
        torch.manual_seed(seed)
        t(img)


def test_the_edges_torchvision_draws_from_are_accepted_and_decode():
    data = jpeg(40, 30)
    for options in [dict(ratio=(3 / 4, 4 / 3), scale=(0.08, 1)), dict(jitter=(0, 0, 0, 0)),
                    dict(jitter=(0.4, 0.4, 0.2, 0.5)), dict(jitter=((0, F32_MAX), 0, 0, (-0.5, 0.5))),
                    dict(jitter=(F32_MAX - 1, F32_MAX - 1, F32_MAX - 1)), dict(ratio=(1e-45, 1e38)),
                    dict(blur_p=1.0, blur_sigma=(1e-45, 1e38)),
                    dict(blur_p=1.0, blur_sigma=F32_MAX), dict(solarize_p=1.0, solarize_threshold=300),
                    dict(solarize_p=1.0, solarize_threshold=-F32_MAX), dict(mean=(1e37, 0, 0)),
                    dict(std=(1e-30, 1, 1)), dict(crop_pct=32 / MAX_SIDE, train=False),
                    dict(crop_pct=1.0, train=False)]:
        for decoder in (lmdbloader.ImageDecode(32, record="raw", dtype=torch.uint8, **options),
                        lmdbloader.ClipDecode(32, frames=2, record=lambda r: [r, r], dtype=torch.uint8,
                                              **options)):
            torch.manual_seed(0)
            out = decoder(data)
            assert out.shape[-3:] == (3, 32, 32), options
        per_crop = {k: v for k, v in options.items() if k not in ("mean", "std", "crop_pct", "train")}
        if per_crop:
            out = lmdbloader.ImageDecode(crops=[lmdbloader.Crop(32, n=2, **per_crop)], record="raw")(data)
            assert out[0].shape == (2, 3, 32, 32), options
    # A float32 factor as large as any: the image as torchvision's brightness makes it.
    img = Image.open(io.BytesIO(data)).convert("RGB")
    got = vision.apply_colour(np.asarray(img), [("brightness", F32_MAX)])
    assert np.array_equal(got, np.asarray(F.adjust_brightness(img, F32_MAX)))


@pytest.mark.parametrize("side", [1, 5, 8])
def test_a_blur_kernel_fits_the_image_as_torchs_reflect_padding(side):
    """torchvision's GaussianBlur of a side x side image: kernel 2 side - 1
    blurs it, 2 side + 1 raises (reflect padding needs kernel // 2 below
    each side); ImageDecode and Crop give the same verdict when made, naming
    the kernel and the size; a blur that is never drawn (blur_p=0) is no
    error, as RandomApply(p=0) never pads."""
    img = torch.randint(0, 256, (3, side, side), dtype=torch.uint8)
    fits, too_large = 2 * side - 1, 2 * side + 1
    F.gaussian_blur(img, [fits, fits], [1.0, 1.0])
    with pytest.raises(RuntimeError):
        F.gaussian_blur(img, [too_large, too_large], [1.0, 1.0])
    data = jpeg(40, 30)
    assert lmdbloader.ImageDecode(side, record="raw", blur_p=1.0, blur_kernel=fits)(data).shape == (3, side, side)
    message = f"blur_kernel {too_large} is too large for the {side}x{side} images"
    with pytest.raises(ValueError, match=message):
        lmdbloader.ImageDecode(side, blur_p=0.5, blur_kernel=too_large)
    with pytest.raises(ValueError, match=message):
        lmdbloader.Crop(side, blur_p=0.5, blur_kernel=too_large)
    with pytest.raises(ValueError, match=message):
        lmdbloader.ClipDecode(side, frames=2, blur_p=0.5, blur_kernel=too_large)
    lmdbloader.ImageDecode(side, blur_kernel=too_large)  # blur_p=0: never drawn
    lmdbloader.Crop(side, blur_kernel=too_large)
    # Given straight to the core, refused as the image is blurred.
    with pytest.raises(ValueError, match=f"blur kernel {too_large} is too large for a {side}x{side} image"):
        vision.apply_colour(np.zeros((side, side, 3), np.uint8), [("blur", 1.0, too_large)])
    with pytest.raises(ValueError, match=f"blur kernel {too_large} is too large for a {side}x{side} image"):
        _core.decode_crops([data], [(0, (0, 0, 40, 30), False, [("blur", 1.0, too_large)], 0, 0, None)],
                           [(np.zeros((3, side, side), np.float32), side, side)])


def test_a_padded_eval_crop_spans_the_whole_image_whatever_its_size():
    """Where CenterCrop pads, the box spans the whole source along that axis:
    resized length x (source / resized length) can round an ulp past the
    edge (208 px: 46 x (208 / 46)), which the decoder must not refuse."""
    data = jpeg(208, 166)  # resize=70: 87x70, padded to 96x96
    out = lmdbloader.ImageDecode(96, train=False, resize=70, record="raw", dtype=torch.uint8, layout="HWC")(data)
    want = F.center_crop(F.resize(Image.open(io.BytesIO(data)).convert("RGB"), 70), 96)
    d = np.abs(out.numpy().astype(int) - np.asarray(want).astype(int))
    assert d.mean() <= 2.0 and (out[:13] == 0).all() and (out[83:] == 0).all()


def test_an_eval_blur_is_held_to_the_resized_image_inside_the_padding():
    """Evaluation blurs the resized image without CenterCrop's padding: a
    shorter side of `resize` (or the pair's sides), known when the decoder
    is made."""
    data = jpeg(40, 20)  # resized to 16x8 (resize=8), padded to 16x16
    out = lmdbloader.ImageDecode(16, train=False, resize=8, record="raw", blur_p=1.0, blur_kernel=15)(data)
    assert out.shape == (3, 16, 16)
    with pytest.raises(ValueError, match="blur_kernel 17 is too large for the 8x8 images"):
        lmdbloader.ImageDecode(16, train=False, resize=8, blur_p=1.0, blur_kernel=17)
    with pytest.raises(ValueError, match="blur_kernel 11 is too large for the 16x5 images"):
        lmdbloader.ImageDecode(16, train=False, resize=(5, 40), blur_p=1.0, blur_kernel=11)
    lmdbloader.ImageDecode(16, train=False, resize=(5, 40), blur_p=1.0, blur_kernel=9)
