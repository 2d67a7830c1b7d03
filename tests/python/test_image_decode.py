"""The fused image path (lmdbloader._core.decode_crops: JPEGs, and RGB pixels decoded
elsewhere, one crop each, through crop_calls) against
torchvision's PIL path: PIL open + convert("RGB") + resized_crop(BILINEAR) [+ hflip]
+ to_tensor + normalize, on photographs (scikit-image's) and generated images
encoded by PIL in every way a corpus may hold them.

Run with -s to see the distribution of per-image differences.
"""

import io
import itertools

import msgpack
import numpy as np
import pytest
import torch
from PIL import Image

import lmdbloader
from lmdbloader import _core

from crop_calls import decode_images, image_size, resample_rgb
from gil_probe import spinner_during
from torchvision_cpu import import_torchvision

skimage_data = pytest.importorskip("skimage.data")
tv = import_torchvision()
from torchvision.transforms import functional as F  # noqa: E402
from torchvision.transforms import InterpolationMode, RandomResizedCrop  # noqa: E402

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
OUT = 224


def encode(img, **kw):
    b = io.BytesIO()
    img.save(b, "JPEG", **kw)
    return b.getvalue()


def photo(name):
    pixels = getattr(skimage_data, name)()
    if isinstance(pixels, tuple):  # a stereo pair
        pixels = pixels[0]
    return Image.fromarray(pixels)


def generated(kind, w, h, seed):
    rng = np.random.default_rng(seed)
    if kind == "gradient":
        x = np.linspace(0, 255, w)[None, :, None]
        y = np.linspace(0, 255, h)[:, None, None]
        a = np.concatenate([x + 0 * y, y + 0 * x, (x + y) / 2], axis=2)
    elif kind == "checker":
        yy, xx = np.mgrid[0:h, 0:w]
        a = (((xx // 7) + (yy // 5)) % 2 * 255)[..., None].repeat(3, 2)
    else:  # noise
        a = rng.integers(0, 256, (h, w, 3))
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))


def resized(img, longer):
    s = longer / max(img.size)
    return img.resize((max(8, round(img.width * s)), max(8, round(img.height * s))), Image.BICUBIC)


def corpus():
    """(name, jpeg bytes): photos at 64-800 px, quality 50-95, baseline and
    progressive, 4:2:0 / 4:2:2 / 4:4:4, restart markers, gray and CMYK, and
    generated images."""
    rng = np.random.default_rng(0)
    out = []
    names = ["astronaut", "coffee", "chelsea", "rocket", "immunohistochemistry", "stereo_motorcycle"]
    for k, name in enumerate(names):
        src = photo(name)
        if src.mode != "RGB":
            src = src.convert("RGB")
        for longer in (64, 160, 350, 500, 800):
            kw = dict(quality=int(rng.choice([50, 75, 90, 95])), progressive=bool(rng.integers(2)),
                      subsampling=int(rng.choice([0, 1, 2])))
            if rng.integers(4) == 0:
                kw["restart_marker_rows"] = 1
            out.append((f"{name}-{longer}-{kw}", encode(resized(src, longer), **kw)))
    for name in ("camera", "coins", "moon"):  # gray photos, stored as 1-component JPEGs
        out.append((f"{name}-gray", encode(resized(photo(name).convert("L"), 400), quality=90)))
    for name in ("astronaut", "coffee"):  # Adobe CMYK, as Pillow writes it
        out.append((f"{name}-cmyk", encode(resized(photo(name), 420).convert("CMYK"), quality=90)))
    for k, kind in enumerate(("gradient", "checker", "noise")):
        out.append((f"{kind}", encode(generated(kind, 333, 251, k), quality=85)))
    return out


def boxes(img, seed):
    """(left, top, width, height): the whole image, a tiny box, thin ones,
    and RandomResizedCrop's own draws."""
    w, h = img.size
    out = [(0, 0, w, h), (w // 3, h // 3, min(8, w), min(8, h)), (0, h // 2, w, max(1, h // 9))]
    torch.manual_seed(seed)
    for _ in range(3):
        i, j, bh, bw = RandomResizedCrop.get_params(img, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3))
        out.append((j, i, bw, bh))
    return out


def reference(jpeg, box, flip, interpolation="bilinear"):
    """torchvision's uint8 HWC and float32 CHW results."""
    img = Image.open(io.BytesIO(jpeg)).convert("RGB")
    left, top, w, h = box
    img = F.resized_crop(img, top, left, h, w, [OUT, OUT], InterpolationMode(interpolation))
    if flip:
        img = F.hflip(img)
    return np.asarray(img), F.normalize(F.to_tensor(img), MEAN, STD).numpy()


def fused(jpegs, bxs, flips, dtype, layout="CHW", scale_in_idct=True, interpolation="bilinear"):
    shape = (len(jpegs), 3, OUT, OUT) if layout == "CHW" else (len(jpegs), OUT, OUT, 3)
    out = np.full(shape, 7, np.float32 if dtype == "float32" else np.uint8)
    decode_images(jpegs, bxs, flips, out, OUT, OUT, layout, dtype, MEAN, STD, scale_in_idct,
                        interpolation=interpolation)
    return out


def levels(diff_float_chw):
    """A float32 difference back in levels of 255 (undoing normalize)."""
    return np.abs(diff_float_chw) * np.array(STD, np.float32).reshape(3, 1, 1) * 255


@pytest.fixture(scope="module")
def cases():
    """(name, jpeg, box, flip, torchvision's uint8, torchvision's float32)."""
    out = []
    for k, (name, jpeg) in enumerate(corpus()):
        img = Image.open(io.BytesIO(jpeg))
        for b, box in enumerate(boxes(img, k)):
            flip = (k + b) % 2 == 1
            out.append((name, jpeg, box, flip) + reference(jpeg, box, flip))
    return out


def summary(label, per_image):
    per_image = np.asarray(per_image)
    print(f"\n{label}: {len(per_image)} images; per-image mean |diff| in levels of 255: "
          f"mean {per_image.mean():.3f}, median {np.median(per_image):.3f}, "
          f"95th percentile {np.percentile(per_image, 95):.3f}, max {per_image.max():.3f}")


@pytest.mark.parametrize("scale_in_idct", [True, False])
def test_float32_output_is_within_two_levels_of_torchvision(cases, scale_in_idct):
    per_image, worst = [], []
    for name, jpeg, box, flip, _, want in cases:
        got = fused([jpeg], [box], [flip], "float32", scale_in_idct=scale_in_idct)[0]
        d = levels(got - want)
        per_image.append(d.mean())
        worst.append(d.max())
        assert d.mean() <= 2.0, f"{name} box {box} flip {flip}: mean {d.mean():.3f} levels"
    summary(f"float32 CHW, IDCT scaling {scale_in_idct}", per_image)
    print(f"  largest single difference {max(worst):.1f} levels")
    if not scale_in_idct:
        # Full-size decoding is torchvision's pixels: only rounding near-ties differ.
        assert max(per_image) < 0.1


@pytest.mark.parametrize("scale_in_idct", [True, False])
def test_uint8_output_is_within_two_levels_of_pil(cases, scale_in_idct):
    per_image = []
    for name, jpeg, box, flip, want, _ in cases:
        got = fused([jpeg], [box], [flip], "uint8", "HWC", scale_in_idct=scale_in_idct)[0]
        d = np.abs(got.astype(np.int16) - want.astype(np.int16))
        per_image.append(d.mean())
        assert d.mean() <= 2.0, f"{name} box {box}: mean {d.mean():.3f} levels"
        if not scale_in_idct:
            assert d.max() <= 2, f"{name} box {box}: max {d.max()} levels"
    summary(f"uint8 HWC, IDCT scaling {scale_in_idct}", per_image)


@pytest.mark.parametrize("scale_in_idct", [True, False])
def test_bicubic_is_within_two_levels_of_torchvision(cases, scale_in_idct):
    """PIL's BICUBIC as torchvision applies it (resized_crop), every case's
    box and flip, both output types; full-size decoding differs only where
    float sums round a near-tie the other way."""
    per_image = []
    for name, jpeg, box, flip, _, _ in cases[::2]:
        want_u8, want_f32 = reference(jpeg, box, flip, "bicubic")
        got = fused([jpeg], [box], [flip], "uint8", "HWC", scale_in_idct, "bicubic")[0]
        d = np.abs(got.astype(np.int16) - want_u8.astype(np.int16))
        per_image.append(d.mean())
        assert d.mean() <= 2.0, f"{name} box {box}: mean {d.mean():.3f} levels"
        got = fused([jpeg], [box], [flip], "float32", "CHW", scale_in_idct, "bicubic")[0]
        assert levels(got - want_f32).mean() <= 2.0
        if not scale_in_idct:
            assert d.max() <= 2, f"{name} box {box}: max {d.max()} levels"
            # Not the bilinear result: the filter was applied.
            bilinear = fused([jpeg], [box], [flip], "uint8", "HWC", False)[0]
            assert d.mean() < np.abs(bilinear.astype(np.int16) - want_u8.astype(np.int16)).mean() or d.max() == 0
    summary(f"bicubic uint8 HWC, IDCT scaling {scale_in_idct}", per_image)
    if not scale_in_idct:
        assert max(per_image) < 0.1


@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
def test_grayscale_is_pils_luma_then_the_resize(cases, interpolation):
    """grayscale=True: the luma, then the crop and resize (torchvision's
    Grayscale first), one channel. From a JPEG, its Y plane (no chroma
    decoded): PIL's convert("L") of the RGB it decodes to but where that RGB
    was clipped (saturated colours) or a float sum rounds a near-tie the
    other way; from RGB pixels, PIL's L exactly (the bounds of the RGB tests
    above)."""
    for name, jpeg, box, flip, _, _ in cases[::3]:
        img = Image.open(io.BytesIO(jpeg)).convert("RGB").convert("L")
        left, top, w, h = box
        want = F.resized_crop(img, top, left, h, w, [OUT, OUT], InterpolationMode(interpolation))
        want = np.asarray(F.hflip(want) if flip else want).astype(np.int16)
        out = np.zeros((1, OUT, OUT), np.uint8)
        decode_images([jpeg], [box], [flip], out, OUT, OUT, "CHW", "uint8", scale_in_idct=False,
                            interpolation=interpolation, grayscale=True)
        d = np.abs(out[0].astype(np.int16) - want)
        # Measured: mean 0.01-0.09 and 99% within 2 levels on photographs; a
        # small saturated one enlarged 3.5-8x (coffee at 64 px): mean 0.41-0.55,
        # 95% within 3, at most 16.
        assert np.percentile(d, 90) <= 2 and d.mean() < 1.0, f"{name} box {box}: max {d.max()}, mean {d.mean():.4f}"
        rgb = np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB"))
        again = np.zeros((OUT, OUT, 1), np.float32)
        resample_rgb(rgb, box, flip, again, OUT, OUT, "HWC", "float32", (0.5,) * 3, (0.5,) * 3,
                           interpolation=interpolation, grayscale=True)
        assert np.abs((again[..., 0] * 0.5 + 0.5) * 255 - want).max() <= 2.01


def test_a_batch_equals_its_images_one_by_one(cases):
    sample = cases[::7]
    jpegs = [c[1] for c in sample]
    bxs = [c[2] for c in sample]
    flips = [c[3] for c in sample]
    batch = fused(jpegs, bxs, flips, "float32")
    for k in range(len(sample)):
        np.testing.assert_array_equal(batch[k], fused([jpegs[k]], [bxs[k]], [flips[k]], "float32")[0])


def test_inputs_may_be_memoryviews_and_out_a_tensors_memory():
    jpeg = encode(resized(photo("coffee"), 300), quality=90)
    out = torch.zeros((2, 3, OUT, OUT), dtype=torch.float32)
    decode_images([memoryview(jpeg), jpeg], [(0, 0, 300, 200), (10, 10, 100, 100)], None,
                        out.numpy(), OUT, OUT)
    want = reference(jpeg, (0, 0, 300, 200), False)[1]
    assert levels(out[0].numpy() - want).mean() < 2
    assert out[1].abs().sum() > 0
    assert _core.scratch_bytes() > 0


def test_resample_rgb_matches_pil_for_pixels_pil_decoded():
    png = io.BytesIO()
    resized(photo("chelsea"), 400).save(png, "PNG")
    img = Image.open(io.BytesIO(png.getvalue())).convert("RGB")
    pixels = np.asarray(img)
    for (box, flip), mode in itertools.product(
            [((0, 0, img.width, img.height), False), ((30, 20, 150, 200), True), ((5, 5, 8, 8), False)],
            ["bilinear", "bicubic"]):
        out = np.zeros((3, OUT, OUT), np.float32)
        resample_rgb(pixels, box, flip, out, OUT, OUT, interpolation=mode)
        left, top, w, h = box
        ref = F.resized_crop(img, top, left, h, w, [OUT, OUT], InterpolationMode(mode))
        if flip:
            ref = F.hflip(ref)
        ref = F.normalize(F.to_tensor(ref), MEAN, STD).numpy()
        assert levels(out - ref).mean() < 0.1
        assert levels(out - ref).max() <= 2.01
    # A view with padded rows (row stride > width * 3) is read in place.
    wide = np.zeros((img.height, img.width + 5, 3), np.uint8)
    wide[:, :img.width] = pixels
    a, b = np.zeros((OUT, OUT, 3), np.uint8), np.zeros((OUT, OUT, 3), np.uint8)
    resample_rgb(wide[:, :img.width], (1, 2, 100, 90), False, a, OUT, OUT, "HWC", "uint8")
    resample_rgb(pixels, (1, 2, 100, 90), False, b, OUT, OUT, "HWC", "uint8")
    np.testing.assert_array_equal(a, b)


def test_image_size():
    jpeg = encode(resized(photo("rocket"), 320), quality=80)
    assert image_size(jpeg) == (320, 214, "jpeg")
    assert image_size(memoryview(jpeg)) == (320, 214, "jpeg")
    assert image_size(encode(photo("camera"), quality=80)) == (512, 512, "jpeg")
    png = io.BytesIO()
    photo("rocket").save(png, "PNG")
    assert image_size(png.getvalue()) == (0, 0, "other")
    # A header claiming 13568 x 13568 pixels: PIL's DecompressionBombError limit.
    bomb = b"\xff\xd8\xff\xc0\x00\x11\x08\x35\x00\x35\x00\x03\x01\x11\x00\x02\x11\x00\x03\x11\x00"
    with pytest.raises(lmdbloader.errors.DecodeError, match="more than the limit"):
        image_size(bomb)


def test_the_batched_split_and_image_sizes_give_each_images_size_and_kind():
    """One call a batch reads every header (width, height, kind), in the
    split's GIL-free loop or alone (image_sizes); a damaged header names
    its place in the batch."""
    jpeg = encode(resized(photo("rocket"), 320), quality=80)
    png = io.BytesIO()
    photo("rocket").save(png, "PNG")
    pixels = np.zeros((7, 5, 3), np.uint8)
    assert _core.image_sizes([jpeg, png.getvalue(), pixels]) == [(320, 214, "jpeg"), (0, 0, "other"),
                                                                 (5, 7, "pixels")]
    records = [msgpack.packb({"image": data}) for data in (jpeg, png.getvalue())]
    images, _, sizes = _core.split_image_records(records, "msgpack", "image", None, False, None, True)
    assert sizes == [(320, 214, "jpeg"), (0, 0, "other")] and bytes(images[0]) == jpeg
    bomb = b"\xff\xd8\xff\xc0\x00\x11\x08\x35\x00\x35\x00\x03\x01\x11\x00\x02\x11\x00\x03\x11\x00"
    for call in (lambda: _core.image_sizes([jpeg, bomb]),
                 lambda: _core.split_image_records([records[0], msgpack.packb({"image": bomb})], target=None,
                                                   sizes=True)):
        with pytest.raises(lmdbloader.errors.DecodeError, match="more than the limit") as e:
            call()
        assert e.value.batch_index == 1


def test_errors_name_the_image_in_the_batch():
    good = encode(resized(photo("astronaut"), 200), quality=90)
    out = np.zeros((3, 3, OUT, OUT), np.float32)
    with pytest.raises(lmdbloader.errors.DecodeError, match="image 1 of 3: .*truncated") as e:
        decode_images([good, good[:len(good) // 2], good], [(0, 0, 200, 200)] * 3, None, out, OUT, OUT)
    assert e.value.batch_index == 1
    assert isinstance(e.value, ValueError)  # DecodeError is a ValueError too
    with pytest.raises(lmdbloader.errors.DecodeError, match="image 2 of 3: not a JPEG") as e:
        decode_images([good, good, b"GIF89a..."], [(0, 0, 200, 200)] * 3, None, out, OUT, OUT)
    assert e.value.batch_index == 2
    with pytest.raises(ValueError, match="not inside the 200x200 image"):
        decode_images([good], [(0, 0, 201, 200)], None, out, OUT, OUT)
    # The crop jobs' own arguments, given to the core straight.
    job = (0, (0, 0, 9, 9), False, None, 0, 0, None)
    with pytest.raises(ValueError, match="crop job 1 is of source 2 of 2: jobs of one source must be together"):
        _core.decode_crops([good] * 2, [job, (2,) + job[1:5] + (1, None)], [(out, OUT, OUT)])
    with pytest.raises(ValueError, match="crop job 2: frame 2 of output 0 is not in the outputs given"):
        decode_images([good] * 3, [(0, 0, 9, 9)] * 3, None, out[:2], OUT, OUT)
    with pytest.raises(ValueError, match="layout"):
        decode_images([good], [(0, 0, 9, 9)], None, out, OUT, OUT, "WHC")
    with pytest.raises(ValueError, match="dtype"):
        decode_images([good], [(0, 0, 9, 9)], None, out, OUT, OUT, "CHW", "float16")
    with pytest.raises(ValueError, match="std"):
        decode_images([good], [(0, 0, 9, 9)], None, out, OUT, OUT, std=(1, 0, 1))
    with pytest.raises(ValueError, match="output size 0x224"):
        decode_images([good], [(0, 0, 9, 9)], None, out, 0, OUT)
    with pytest.raises(TypeError, match="buffer protocol"):
        decode_images([good], [(0, 0, 9, 9)], None, b"read-only bytes", OUT, OUT)
    with pytest.raises(TypeError, match="buffer protocol"):
        decode_images([12345], [(0, 0, 9, 9)], None, out, OUT, OUT)
    with pytest.raises(ValueError, match="box 0"):
        decode_images([good], [(0, 0, 9)], None, out, OUT, OUT)
    with pytest.raises(ValueError, match="a crop job must be"):
        _core.decode_crops([good], [job[:3]], [(out, OUT, OUT)])
    with pytest.raises(ValueError, match="an output must be"):
        _core.decode_crops([good], [job], [(out, OUT)])
    with pytest.raises(ValueError, match=r"a 30x30 crop at \(200, 0\) does not lie inside its 224x224 frame"):
        _core.decode_crops([good], [job[:6] + ((200, 0, 30, 30),)], [(out, OUT, OUT)])


def test_other_threads_run_during_a_batch():
    jpeg = encode(resized(photo("coffee"), 500), quality=90)
    n = 48
    out = np.zeros((n, 3, OUT, OUT), np.float32)
    _, elapsed, during, rate = spinner_during(
        lambda: decode_images([jpeg] * n, [(0, 0, 500, 333)] * n, None, out, OUT, OUT, scale_in_idct=False))
    assert elapsed > 0.02, "the batch was too quick to tell"
    assert during > 0.1 * rate * elapsed, f"the other thread ran {during} times in {elapsed:.3f} s"
