"""Images and clips decoded, cropped, resized, flipped and normalized in C++
straight into the batch: :class:`ImageDecode` and :class:`ClipDecode`.

torchvision's ImageNet recipe decodes every pixel with PIL, crops, resizes,
converts to a float tensor and normalizes it, each step a pass over memory.
Here a JPEG's crop box is drawn from its header alone, then only the box is
decoded (libjpeg-turbo's region decoding), at 1/2, 1/4 or 1/8 scale in the
IDCT when the box is at least twice the output, resized with PIL's
antialiased bilinear filter, mirrored and normalized in one pass that writes
float32 (or uint8) straight into the output: under
:class:`lmdbloader.DataLoader` the batch's shared-memory ring slot, with no
PIL image, no tensor per sample and no collate copy.

The random draws are torchvision's, made in the same order with torch's
generator (``RandomResizedCrop.get_params``, then ``RandomHorizontalFlip``),
so ``torch.manual_seed`` and a DataLoader's per-worker seeding give the boxes
and flips torchvision would draw. Images that are not baseline or progressive
8-bit JPEGs (PNG, WebP, GIF, BMP, ...) are decoded by PIL and go through the
same crop, resize, flip and normalization (counted in :meth:`ImageDecode.stats`).
"""

import io
import math
import numbers

import msgpack
import numpy as np
import torch

from . import _core
from .errors import DecodeError

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

_DTYPES = {torch.float32: "float32", torch.uint8: "uint8"}
_LAYOUTS = ("CHW", "HWC")


def _pair(value, what):
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value, value)
    if (not isinstance(value, (tuple, list)) or len(value) != 2 or
            not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and 0 < v <= 16384 for v in value)):
        raise ValueError(f"{what} must be a positive integer or (height, width) up to 16384; got {value!r}")
    return int(value[0]), int(value[1])


def _range(value, what, low):
    if (not isinstance(value, (tuple, list)) or len(value) != 2 or
            not all(isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and v > low
                    for v in value) or value[0] > value[1]):
        raise ValueError(f"{what} must be (min, max) with {low} < min <= max; got {value!r}")
    return float(value[0]), float(value[1])


def _three(value, what, positive=False):
    if (not isinstance(value, (tuple, list)) or len(value) != 3 or
            not all(isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and
                    (v > 0 or not positive) for v in value)):
        raise ValueError(f"{what} must be three finite numbers{' above 0' if positive else ''}; got {value!r}")
    return tuple(float(v) for v in value)


def random_resized_crop_box(width, height, scale, ratio):
    """torchvision's ``RandomResizedCrop.get_params`` for an image of this
    size: (top, left, height, width), drawn with torch's generator in the same
    order (10 tries of area and log-ratio, then a center crop of the ratio
    clamped to ``ratio``)."""
    area = height * width
    log_ratio = torch.log(torch.tensor(ratio))
    for _ in range(10):
        target_area = area * torch.empty(1).uniform_(scale[0], scale[1]).item()
        aspect = torch.exp(torch.empty(1).uniform_(log_ratio[0], log_ratio[1])).item()
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            top = torch.randint(0, height - h + 1, size=(1,)).item()
            left = torch.randint(0, width - w + 1, size=(1,)).item()
            return top, left, h, w
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        h, w = height, int(round(height * max(ratio)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def resize_center_crop_box(width, height, resize, size):
    """The box of the source that torchvision's ``Resize(resize)`` (shorter
    side) then ``CenterCrop(size)`` keeps, in source pixels:
    (left, top, width, height), fractional. Resampling it to ``size`` is that
    recipe's resize restricted to the kept pixels: the same filter, the same
    centers."""
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = resize, int(resize * long / short)
    new_w, new_h = (new_short, new_long) if width <= height else (new_long, new_short)
    out_h, out_w = size
    top = int(round((new_h - out_h) / 2.0))
    left = int(round((new_w - out_w) / 2.0))
    sx, sy = width / new_w, height / new_h
    return (left * sx, top * sy, out_w * sx, out_h * sy)


class ImageDecode:
    """``LmdbDataset(decode=ImageDecode(224))``: each record's image decoded,
    cropped, resized, flipped and normalized in C++.

    Training (``train=True``): torchvision's ``RandomResizedCrop(size,
    scale, ratio)`` (bilinear, antialiased), ``RandomHorizontalFlip(flip)``,
    ``ToTensor`` and ``Normalize(mean, std)``. Evaluation (``train=False``):
    ``Resize(resize)`` of the shorter side (default: size x 256 / 224, so
    256 for 224), ``CenterCrop(size)``, ``ToTensor``, ``Normalize``.

    ``dtype``: torch.float32 (normalized) or torch.uint8 (the resized pixels,
    0-255, as PIL's resize gives them; mean and std unused). ``layout``:
    "CHW" (as ToTensor) or "HWC". ``field``: the msgpack field holding the
    image (``"image"``, as ``convert --from image_folder`` writes), or None
    for records that are the encoded image itself. ``target``: the field
    returned beside the image (``(image, record[target])``), or None for the
    image alone.

    A record whose image does not decode (truncated, corrupt, not an image,
    more pixels than PIL's decompression-bomb limit) raises
    :class:`lmdbloader.DecodeError` naming the record and file.
    """

    def __init__(self, size, *, train=True, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), flip=None, resize=None,
                 mean=IMAGENET_MEAN, std=IMAGENET_STD, dtype=torch.float32, layout="CHW", field="image",
                 target="label"):
        self.size = _pair(size, "size")
        self.train = bool(train)
        self.scale = _range(scale, "scale", 0.0)
        if self.scale[1] > 1.0:
            raise ValueError(f"scale must lie in (0, 1]; got {scale!r}")
        self.ratio = _range(ratio, "ratio", 0.0)
        if flip is None:
            flip = 0.5 if self.train else 0.0
        if isinstance(flip, bool) or not isinstance(flip, numbers.Real) or not 0.0 <= flip <= 1.0:
            raise ValueError(f"flip must be a probability from 0 to 1; got {flip!r}")
        self.flip = float(flip)
        if resize is None:
            resize = int(round(min(self.size) * 256 / 224))
        if isinstance(resize, bool) or not isinstance(resize, numbers.Integral) or resize < max(self.size):
            raise ValueError(f"resize (the shorter side before the center crop) must be an integer of at least "
                             f"{max(self.size)}; got {resize!r}")
        self.resize = int(resize)
        self.mean = _three(mean, "mean")
        self.std = _three(std, "std", positive=True)
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be torch.float32 or torch.uint8; got {dtype!r}")
        self.dtype = dtype
        if layout not in _LAYOUTS:
            raise ValueError(f"layout must be 'CHW' or 'HWC'; got {layout!r}")
        self.layout = layout
        for what, value in (("field", field), ("target", target)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{what} must be a field name (str) or None; got {value!r}")
        self.field, self.target = field, target
        self._counts = {"jpeg": 0, "pil": 0}

    # -- what a sample is --------------------------------------------------

    @property
    def frame_shape(self):
        h, w = self.size
        return (3, h, w) if self.layout == "CHW" else (h, w, 3)

    @property
    def sample_shape(self):
        """The shape of one decoded sample."""
        return self.frame_shape

    def stats(self):
        """Images decoded in this process: by the fused JPEG path, and by PIL
        (other formats), and the bytes of decode scratch this thread holds."""
        return {**self._counts, "scratch_bytes": _core.scratch_bytes()}

    def __repr__(self):
        kind = (f"train, scale={self.scale}, ratio={self.ratio}" if self.train else f"eval, resize={self.resize}")
        return (f"lmdbloader.ImageDecode({self.size}, {kind}, flip={self.flip}, dtype={self.dtype}, "
                f"layout={self.layout!r}, field={self.field!r}, target={self.target!r})")

    # -- one record ----------------------------------------------------------

    def __call__(self, record):
        """A record's bytes -> the image tensor, or (image, target)."""
        images, targets = self.decode_records([record])
        return images[0] if self.target is None else (images[0], targets[0])

    def decode_records(self, records, out=None, where=None):
        """Decodes records (bytes-like) into ``out`` (a contiguous tensor of
        (len(records), *sample_shape) and the decoder's dtype, made when
        None); returns (out, the targets). ``where(k)`` names record k in
        errors."""
        groups, targets = [], []
        for k, record in enumerate(records):
            image, t = self._split(record, k, where)
            groups.append([image])
            targets.append(t)
        return self._decode_into(groups, out, where), targets

    # -- the work ----------------------------------------------------------

    def _split(self, record, k, where):
        if self.field is None and self.target is None:
            return record, None
        try:
            fields = msgpack.unpackb(record, raw=False)
        except Exception as e:
            raise DecodeError(f"{_name(where, k)}: not a msgpack record ({e}); "
                              f"for records that are the image itself pass field=None, target=None") from None
        if not isinstance(fields, dict):
            raise DecodeError(f"{_name(where, k)}: the record is not a msgpack map")
        if self.field is None:
            image = record
        else:
            if self.field not in fields:
                raise DecodeError(f"{_name(where, k)}: no field {self.field!r} (fields: {sorted(map(str, fields))})")
            image = fields[self.field]
            if not isinstance(image, self._field_type):
                raise DecodeError(f"{_name(where, k)}: field {self.field!r} holds {type(image).__name__}, "
                                  f"not {self._field_kind}")
        if self.target is None:
            return image, None
        if self.target not in fields:
            raise DecodeError(f"{_name(where, k)}: no field {self.target!r} (fields: {sorted(map(str, fields))})")
        return image, fields[self.target]

    _field_type = (bytes, bytearray)
    _field_kind = "the image's bytes"

    def _box(self, width, height):
        """(left, top, width, height) in source pixels, and the flip, drawn in
        torchvision's order."""
        if self.train:
            top, left, h, w = random_resized_crop_box(width, height, self.scale, self.ratio)
            box = (float(left), float(top), float(w), float(h))
        else:
            box = resize_center_crop_box(width, height, self.resize, self.size)
        flip = self.flip > 0 and torch.rand(1).item() < self.flip
        return box, flip

    def _decode_into(self, groups, out, where):
        """groups[k]: the encoded frames of sample k (one for an image), all
        cut with one box and one flip. Writes (len(groups), T, *sample_shape)."""
        count, frames = len(groups), len(groups[0]) if groups else 1
        if out is None:
            out = torch.empty((count, *self.sample_shape), dtype=self.dtype)
        if (out.dtype != self.dtype or not out.is_contiguous() or
                out.numel() != count * frames * math.prod(self.frame_shape)):
            raise ValueError(f"out must be a contiguous {self.dtype} tensor of {(count, *self.sample_shape)}; "
                             f"got {out.dtype} {tuple(out.shape)}")
        flat = out.view(-1, *self.frame_shape)
        jpegs, boxes, flips, slots, others = [], [], [], [], []
        for k, group in enumerate(groups):
            box = flip = None
            for f, image in enumerate(group):
                try:
                    width, height, _, is_jpeg = _core.image_info(image)
                except DecodeError as e:
                    raise DecodeError(f"{_name(where, k)}: {e}") from None
                if not is_jpeg:
                    width, height = _pil_size(image, where, k)
                if box is None:
                    box, flip = self._box(width, height)
                    size = (width, height)
                elif (width, height) != size:
                    raise DecodeError(f"{_name(where, k)}: frame {f} is {width}x{height}, frame 0 "
                                      f"{size[0]}x{size[1]}: a clip's frames share one crop box")
                if is_jpeg:
                    jpegs.append(image)
                    boxes.append(box)
                    flips.append(flip)
                    slots.append(k * frames + f)
                else:
                    others.append((k, k * frames + f, image, box, flip))
        h, w = self.size
        dtype = _DTYPES[self.dtype]
        if jpegs:
            # One call for the batch, the GIL released; contiguous runs of
            # slots are the common case (every image a JPEG).
            if slots == list(range(slots[0], slots[0] + len(slots))):
                target = flat[slots[0]:slots[0] + len(slots)]
                self._decode_jpegs(jpegs, boxes, flips, target, where, [s // frames for s in slots])
            else:
                for image, box, flip, slot in zip(jpegs, boxes, flips, slots):
                    self._decode_jpegs([image], [box], [flip], flat[slot:slot + 1], where, [slot // frames])
            self._counts["jpeg"] += len(jpegs)
        for k, slot, image, box, flip in others:
            pixels = _pil_rgb(image, where, k)
            _core.resample_rgb(pixels, box, flip, flat[slot].numpy(), w, h, self.layout, dtype,
                               self.mean, self.std)
            self._counts["pil"] += 1
        return out

    def _decode_jpegs(self, jpegs, boxes, flips, target, where, samples):
        h, w = self.size
        try:
            _core.decode_images(jpegs, boxes, flips, target.numpy(), w, h, self.layout, _DTYPES[self.dtype],
                                self.mean, self.std)
        except DecodeError as e:
            k = samples[getattr(e, "batch_index", 0)]
            raise DecodeError(f"{_name(where, k)}: {e}") from None


class ClipDecode(ImageDecode):
    """``LmdbDataset(decode=ClipDecode(112, frames=8))``: a record holding a
    list of encoded frames (``{"frames": [...]}``, as ``convert --from
    video_folder`` writes) -> a [T, C, H, W] tensor (``layout="HWC"``:
    [T, H, W, C]), every frame cut with one crop box and one flip.

    ``frames`` frames, ``stride`` apart: from a random start in training
    (torch's generator, drawn before the box), from the middle in
    evaluation; a clip shorter than that repeats its last frame. Every other
    argument is :class:`ImageDecode`'s.
    """

    def __init__(self, size, *, frames=8, stride=1, field="frames", **options):
        super().__init__(size, field=field, **options)
        for what, value in (("frames", frames), ("stride", stride)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= value <= 4096:
                raise ValueError(f"{what} must be an integer from 1 to 4096; got {value!r}")
        if self.field is None:
            raise ValueError("a clip's frames come from a msgpack field: field must name it")
        self.frames, self.stride = int(frames), int(stride)

    _field_type = (list, tuple)
    _field_kind = "a list of encoded frames"

    @property
    def sample_shape(self):
        return (self.frames, *self.frame_shape)

    def __repr__(self):
        return super().__repr__().replace("ImageDecode(", f"ClipDecode(frames={self.frames}, stride={self.stride}, ")

    def decode_records(self, records, out=None, where=None):
        groups, targets = [], []
        for k, record in enumerate(records):
            frames, t = self._split(record, k, where)
            if not frames or not all(isinstance(f, (bytes, bytearray)) for f in frames):
                raise DecodeError(f"{_name(where, k)}: field {self.field!r} holds no list of encoded frames")
            groups.append([frames[i] for i in self._chosen(len(frames))])
            targets.append(t)
        return self._decode_into(groups, out, where), targets

    def _chosen(self, available):
        span = (self.frames - 1) * self.stride + 1
        room = max(available - span, 0)
        start = torch.randint(0, room + 1, size=(1,)).item() if self.train else room // 2
        return [min(start + t * self.stride, available - 1) for t in range(self.frames)]


def _name(where, k):
    return where(k) if where is not None else f"image {k} of the batch"


def _pil_size(data, where, k):
    image = _pil_open(data, where, k)
    return image.size


def _pil_open(data, where, k):
    from PIL import Image
    try:
        return Image.open(io.BytesIO(data))
    except Exception as e:  # PIL's UnidentifiedImageError, DecompressionBombError, OSError
        raise DecodeError(f"{_name(where, k)}: not a decodable image ({type(e).__name__}: {e})") from None


def _pil_rgb(data, where, k):
    image = _pil_open(data, where, k)
    try:
        return np.asarray(image.convert("RGB"))
    except Exception as e:  # truncated or corrupt pixel data
        raise DecodeError(f"{_name(where, k)}: the image does not decode ({type(e).__name__}: {e})") from None
