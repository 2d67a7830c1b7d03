"""Images and clips decoded, cropped, resized, flipped and normalized in C++
straight into the batch: :class:`ImageDecode` and :class:`ClipDecode`.

torchvision's ImageNet recipe decodes every pixel with PIL, crops, resizes,
converts to a float tensor and normalizes it, each step a pass over memory.
Here a JPEG's crop box is drawn from its header alone, then only the box is
decoded (libjpeg-turbo's region decoding), at 1/2, 1/4 or 1/8 scale in the
IDCT when the box stays 1.5 times the output at that scale, resized with PIL's
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

import inspect
import math
import numbers

import torch

from . import _core
from ._draws import generator
from ._colour_ops import ColourDraws, apply_colour  # noqa: F401 (public here)
from ._crop_boxes import (CropPlan, Point, Size, eval_resize, random_resized_crop,  # noqa: F401
                          random_resized_crop_box, resize_center_crop_plan)
from ._crop_jobs import CropJobs, named_errors
from ._image_checks import finite_values, normalization, ratio_range, side_pair, value_range
from ._image_records import NO_TARGET, batch_targets, fn_name, image_name
from ._multi_crop import (PER_CROP, Crop, crop_list, crops_or_views, decode_multi_crop,  # noqa: F401 (Crop public)
                          former_name, output_tensors)
from .errors import DecodeError

# The image path's option table, written once in C++ (image_decode.h, and the
# converter's record layouts): names, defaults and limits.
_OPTIONS = _core.image_options()
IMAGENET_MEAN = tuple(_OPTIONS["mean"])
IMAGENET_STD = tuple(_OPTIONS["std"])
#: How an image (or a clip's frames) and its target come out of a record.
RECORD_LAYOUTS = tuple(_OPTIONS["records"])
_DTYPES = {getattr(torch, name): name for name in _OPTIONS["dtypes"]}
_LAYOUTS = tuple(_OPTIONS["layouts"])
_MAX_SIDE = _OPTIONS["max_side"]


def __getattr__(name):
    return former_name(name, __name__)  # View, Crop's former name, with a warning


class ImageDecode:
    """``LmdbDataset(decode=ImageDecode(224))``: each record's image decoded,
    cropped, resized, flipped and normalized in C++.

    Training (``train=True``): torchvision's ``RandomResizedCrop(size,
    scale, ratio, interpolation)``, ``RandomHorizontalFlip(flip)``,
    ``ToTensor`` and ``Normalize(mean, std)``. Evaluation (``train=False``):
    ``Resize(resize)`` of the shorter side (default: the shorter of ``size``
    x 256 / 224, so 256 for 224; ``crop_pct``: timm's ``size / crop_pct``;
    ``resize=(h, w)``: the image squashed to that size, as OCR recipes'
    ``Resize((32, 128))``), ``CenterCrop(size)`` (which pads with
    zeros, as torchvision's does, where ``size`` is larger than the resized
    image), ``ToTensor``, ``Normalize``. ``size`` is an int or (height,
    width).

    ``grayscale=True``: one channel, the luma before the resize
    (torchvision's ``Grayscale()`` first, as OCR recipes read text lines): a
    JPEG's own Y, its chroma not decoded (PIL's ``draft("L")``), which is
    ``convert("L")`` of its RGB but where that RGB clips (under a level on
    average); ``mean`` and ``std`` then one number each (default 0.5 and 0.5).

    ``interpolation``: ``"bilinear"`` (the default) or ``"bicubic"``, PIL's
    antialiased filters as torchvision applies them to PIL images (CLIP,
    timm and DINOv2 recipes train and evaluate with bicubic), for training
    and evaluation alike.

    ``dtype``: torch.float32 (normalized) or torch.uint8 (the resized pixels,
    0-255, as PIL's resize gives them; mean and std unused). ``layout``:
    "CHW" (as ToTensor) or "HWC".

    Colour, after the flip, on the resized levels, as torchvision changes
    PIL images: ``jitter=(brightness, contrast, saturation[, hue])``:
    ``RandomApply([ColorJitter(...)], p=jitter_p)`` (``jitter_p=1``, the
    default: ColorJitter alone);
    ``gray_p``: ``RandomGrayscale(gray_p)``; ``blur_p``: ``RandomApply([GaussianBlur(
    blur_kernel, blur_sigma)], blur_p)`` (9, (0.1, 2.0)); ``solarize_p``:
    ``RandomSolarize(solarize_threshold, solarize_p)`` (threshold 128), in
    that order, drawn after the flip with torch's generator. On a padded
    eval crop the ops see the image without its padding.
    ``apply_colour(pixels, ops)`` applies given ops to a uint8 array.
    ``blur_kernel // 2`` must lie below both sides of the image it blurs
    (torchvision's reflect padding, which torch refuses otherwise); every
    number an option holds within float32's finite range, as torch draws
    it (docs/NOTES.md says each option's rule).

    ``crops=[Crop(...), ...]`` (training only; no ``size``, and ``scale``,
    ``ratio``, ``flip`` and the colour options are each Crop's): several
    crops of each image from one decode (DINOv2, iBOT), a sample a tuple of
    one (n, C, H, W) tensor a Crop (HWC: (n, H, W, C)), a batch a list of
    (B, n, C, H, W), per image and Crop in order each crop drawn as above.
    DINOv2's crop-major order: ``x.transpose(0, 1).flatten(0, 1)``.
    (``views=`` and ``View``, their former names, still work with a
    DeprecationWarning: a view is a zero-copy read, ``LmdbDataset(views=True)``.)

    ``record``: how the image and its target come out of a record.
    ``"msgpack"`` (the default): a msgpack map, the image in ``field``
    (``"image"``, as ``convert --from image_folder`` writes; None for records
    that are the encoded image itself) and the target in ``target``
    (``"label"``; None for the image alone). ``"raw"``: the record is the
    encoded image (LSUN, BasicSR). ``"caffe"``: a Caffe ``Datum``
    (``convert_imageset``), parsed in C++: an encoded image goes through the
    JPEG path, raw C x H x W BGR pixels through the pixel path, ``label`` is
    the target. A callable: ``record(bytes)`` returns the image's bytes, or
    ``(image bytes, target)``, e.g. ``pickle.loads`` for records pickled as
    ``(jpeg, label)``; it runs in Python once per record (a few microseconds
    for ``pickle.loads``) before the batch's one C++ decode call.
    ``LmdbDataset(targets=...)`` overrides whatever target the record holds.

    A record whose image does not decode (truncated, corrupt, not an image,
    more pixels than PIL's decompression-bomb limit) raises
    :class:`lmdbloader.DecodeError` naming the record and file.
    """

    def __init__(self, size=None, *, train=True, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), flip=None, resize=None,
                 crop_pct=None, mean=None, std=None, dtype=torch.float32, layout="CHW",
                 record="msgpack", field="image", target="label", interpolation="bilinear", grayscale=False,
                 jitter=None, jitter_p=1.0, gray_p=0.0, solarize_p=0.0, solarize_threshold=128,
                 blur_p=0.0, blur_sigma=(0.1, 2.0), blur_kernel=9, crops=None, views=None):
        crops = crops_or_views(crops, views)
        self.crops = None
        if crops is not None:
            given, defaults = locals(), inspect.signature(ImageDecode.__init__).parameters
            self.crops = crop_list(crops, size, train, {n: given[n] for n in PER_CROP},
                                   {n: defaults[n].default for n in PER_CROP})
            size = self.crops[0].size
        self.size = side_pair(size, "size")
        if interpolation not in _OPTIONS["interpolations"]:
            raise ValueError(f"interpolation must be {' or '.join(map(repr, _OPTIONS['interpolations']))}; "
                             f"got {interpolation!r}")
        self.interpolation = interpolation
        self.train = bool(train)
        self.scale = value_range(scale, "scale", 0.0)
        if self.scale[1] > 1.0:
            raise ValueError(f"scale must lie in (0, 1]; got {scale!r}")
        self.ratio = ratio_range(ratio, "ratio")
        if flip is None:
            flip = 0.5 if self.train else 0.0
        if isinstance(flip, bool) or not isinstance(flip, numbers.Real) or not 0.0 <= flip <= 1.0:
            raise ValueError(f"flip must be a probability from 0 to 1; got {flip!r}")
        self.flip = float(flip)
        self.resize = eval_resize(self.size, resize, crop_pct, _MAX_SIDE)
        self.grayscale = bool(grayscale)
        self.colour = ColourDraws(jitter, jitter_p, gray_p, solarize_p, solarize_threshold,
                                  blur_p, blur_sigma, blur_kernel)
        c = self.channels = 1 if self.grayscale else 3
        self.mean = finite_values(mean if mean is not None else (0.5,) if c == 1 else IMAGENET_MEAN, "mean", count=c)
        self.std = finite_values(std if std is not None else (0.5,) if c == 1 else IMAGENET_STD, "std", True, count=c)
        normalization(self.mean, self.std)
        # The ops see the resized crop: the output (training), or the
        # resized image inside it (evaluation), at least min(resize, size)
        # a side.
        if self.crops is None:
            blurred = self.size if self.train else tuple(
                min(o, r) for o, r in zip(self.size, self.resize if isinstance(self.resize, tuple) else
                                          (self.resize, self.resize)))
            self.colour.check_blur_fits(*blurred)
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be {' or '.join(f'torch.{n}' for n in _DTYPES.values())}; got {dtype!r}")
        self.dtype = dtype
        if layout not in _LAYOUTS:
            raise ValueError(f"layout must be {' or '.join(map(repr, _LAYOUTS))}; got {layout!r}")
        self.layout = layout
        if not (callable(record) or (isinstance(record, str) and record in RECORD_LAYOUTS)):
            raise ValueError(f"record must be one of {', '.join(map(repr, RECORD_LAYOUTS))} or a callable; "
                             f"got {record!r}")
        self.record = record
        for what, value in (("field", field), ("target", target)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{what} must be a field name (str) or None; got {value!r}")
        if record != "msgpack":
            field = target = None  # the layout says where the image and target are
        self.field, self.target = field, target
        self._counts = {"jpeg": 0, "pil": 0, "pixels": 0}

    # -- what a sample is --------------------------------------------------

    @property
    def frame_shape(self):
        return self._frame_shape_of(*self._out)

    @property
    def _out(self):
        """The output's Size (``size`` is torchvision's (height, width))."""
        return Size(self.size[1], self.size[0])

    @property
    def sample_shape(self):
        """The shape of one decoded sample; with crops a tuple of them, one a Crop."""
        if self.crops is not None:
            return tuple(crop.shape(self.channels, self.layout) for crop in self.crops)
        return self.frame_shape

    @property
    def outputs(self):
        """(dtype, shape) of each tensor of a sample: one, or one a Crop."""
        return tuple((self.dtype, s) for s in (self.sample_shape if self.crops is not None else [self.sample_shape]))

    @property
    def sample_is_tuple(self):
        """Whether a sample is a tuple of tensors, one a Crop (else one tensor)."""
        return self.crops is not None

    def samples_of(self, images):
        """decode_records' images, one item a sample: a tensor, or with crops a tuple of one a Crop."""
        return list(zip(*images)) if self.crops is not None else list(images)

    def stats(self):
        """Images decoded in this process: by the fused JPEG path, by PIL
        (other formats), from raw pixels (Caffe Datums), and the bytes of
        decode scratch this thread holds."""
        return {**self._counts, "scratch_bytes": _core.scratch_bytes()}

    def __repr__(self):
        kind = (f"train, scale={self.scale}, ratio={self.ratio}" if self.train else f"eval, resize={self.resize}")
        head = (f"crops={list(self.crops)!r}" if self.crops is not None else
                f"{self.size}, {kind}, flip={self.flip}, {self.colour!r}")
        return (f"lmdbloader.ImageDecode({head}, interpolation={self.interpolation!r}, dtype={self.dtype}, "
                f"layout={self.layout!r}, record={self.record!r}, field={self.field!r}, target={self.target!r})")

    # -- one record ----------------------------------------------------------

    def __call__(self, record):
        """A record's bytes -> the image tensor, or (image, target)."""
        images, targets = self.decode_records([record])
        image = self.samples_of(images)[0]
        return image if targets is None else (image, targets[0])

    def decode_records(self, records, out=None, where=None, targets=True):
        """Decodes records (bytes-like) into ``out`` (a contiguous tensor of
        (len(records), *sample_shape) and the decoder's dtype, made when
        None); returns (out, the targets), the targets None when the records
        hold none or ``targets`` is false (the caller has its own: the
        records' are not looked for). ``where(k)`` names record k in errors."""
        images, found, sizes = self._split(records, where, targets, sizes=True)
        out = self._output(len(records), out)
        found = batch_targets(found, where) if targets else None
        jobs = CropJobs(images, sizes, self._counts, where)
        if self.crops is not None:
            decode_multi_crop(self.crops, jobs, out, self._core_options())
        else:
            self._decode_into(jobs, out)
        return out, found

    # -- the work ----------------------------------------------------------

    def _output(self, count, out):
        """out, checked (with crops a tuple, one tensor a Crop), or made."""
        return output_tensors([(count, *shape) for _, shape in self.outputs], self.dtype, out, self.crops is not None)

    def _split(self, records, where, want_target=True, sizes=False):
        """(the images: bytes-like, lists of frames, or RGB pixels as
        (height, width, 3) uint8 arrays; the targets, NO_TARGET where a
        record has none; with ``sizes``, each image's (width, height, kind)),
        the layout's split in C++ (image_record.h), one call for the batch; a
        callable layout runs here, a record at a time, its images' sizes then
        read by one call."""
        name = lambda k: image_name(where, k)  # noqa: E731
        if callable(self.record):
            pairs = [self._split_by(self.record, record, k, where) for k, record in enumerate(records)]
            images, targets = [image for image, _ in pairs], [target for _, target in pairs]
            if not sizes:
                return images, targets
            # A clip's frames: read for those its clips are cut from (ClipDecode).
            if self._list_is_frames:
                return images, targets, None
            with named_errors(name):
                return images, targets, _core.image_sizes(images)
        with named_errors(name):
            return _core.split_image_records(records, self.record, self.field, self.target if want_target else None,
                                             self._list_is_frames, NO_TARGET, sizes)

    def _split_by(self, fn, record, k, where):
        """record=callable: fn(record) is the image, or (image, target)."""
        try:
            got = fn(record)
        except Exception as e:
            if hasattr(e, "add_note"):
                e.add_note(f"lmdbloader: record={fn_name(fn)} raised on {image_name(where, k)}")
            raise
        image, target = got, NO_TARGET
        if self._is_pair(got):
            image, target = got
        elif isinstance(got, tuple) and not self._list_is_frames:
            raise TypeError(f"{image_name(where, k)}: record={fn_name(fn)} returned a tuple of {len(got)}; "
                            f"expected {self._field_kind} or ({self._field_kind}, target)")
        if self._list_is_frames and isinstance(image, tuple):
            image = list(image)
        if not isinstance(image, self._returned_type):
            raise TypeError(f"{image_name(where, k)}: record={fn_name(fn)} returned {type(image).__name__}; "
                            f"expected {self._field_kind} or ({self._field_kind}, target)")
        if isinstance(image, memoryview) and not image.contiguous:
            image = image.tobytes()
        return image, target

    @staticmethod
    def _is_pair(got):
        """(image bytes, target), as a tuple or a list (msgpack, json)."""
        return isinstance(got, (tuple, list)) and len(got) == 2 and isinstance(got[0], (bytes, bytearray, memoryview))

    _returned_type = (bytes, bytearray, memoryview)
    _field_kind = "the image's bytes"
    _list_is_frames = False

    def _plan(self, width, height):
        """The CropPlan of an image of this size, drawn in torchvision's order."""
        if self.train:
            box, inner, at = random_resized_crop(width, height, self.scale, self.ratio), self._out, Point(0, 0)
        else:
            box, inner, at = resize_center_crop_plan(width, height, self.resize, self.size)
        flip = self.flip > 0 and torch.rand(1, generator=generator()).item() < self.flip
        return CropPlan(box, inner, at, flip, self.colour.draw() if self.colour.active else None)

    def _decode_into(self, jobs, out, frames=1):
        """Sources k * frames .. k * frames + frames - 1 of ``jobs``: the
        frames of sample k (one for an image), all cut with one box and one
        flip. Writes (len(jobs.sources) // frames, frames, *frame_shape) into
        out: one job a frame, one decode_crops call."""
        out_size = self._out
        for k in range(len(jobs.sources) // frames):
            plan = None
            for s in range(k * frames, (k + 1) * frames):
                width, height = jobs.sizes[s]
                if plan is None:
                    plan, first = self._plan(width, height), Size(width, height)
                elif (width, height) != first:
                    raise DecodeError(f"{image_name(jobs.where, jobs.owner(s))}: frame {s - k * frames} is "
                                      f"{width}x{height}, frame 0 {first.width}x{first.height}: a clip's frames "
                                      "share one crop box")
                inside = None
                if plan.inner != out_size:
                    # CenterCrop's padding: the flip mirrors the padded
                    # image, so the inner part lands at the mirrored offset.
                    x = out_size.width - plan.at.x - plan.inner.width if plan.flip else plan.at.x
                    inside = (x, plan.at.y, plan.inner.width, plan.inner.height)
                jobs.add(s, plan.box, plan.flip, plan.colour, 0, s, inside)
        flat = out.view(-1, *self.frame_shape)
        jobs.decode([(flat.numpy(), out_size.width, out_size.height)], fill=self._fill, **self._core_options())
        return out

    def _frame_shape_of(self, w, h):
        return (self.channels, h, w) if self.layout == "CHW" else (h, w, self.channels)

    @property
    def _fill(self):
        """What CenterCrop's zero padding becomes after ToTensor and
        Normalize, per channel (zeros for uint8)."""
        if self.dtype == torch.uint8:
            return (0.0, 0.0, 0.0)
        fill = [-m / s for m, s in zip(self.mean, self.std)]
        return tuple(fill * (3 // len(fill)))

    def _core_options(self):
        """decode_crops' output type, layout, normalization and filter."""
        return dict(mean=self.mean * (3 // len(self.mean)), std=self.std * (3 // len(self.std)),
                    interpolation=self.interpolation, grayscale=self.grayscale, layout=self.layout,
                    dtype=_DTYPES[self.dtype])


class ClipDecode(ImageDecode):
    """``LmdbDataset(decode=ClipDecode(112, frames=8))``: a record holding a
    list of encoded frames -> a [T, C, H, W] tensor (``layout="HWC"``:
    [T, H, W, C]), every frame cut with one crop box and one flip.

    ``frames`` frames, ``stride`` apart: from a random start in training
    (torch's generator: a batch's starts are drawn first, then each clip's
    box and flip), from the middle in evaluation; a clip shorter than that
    repeats its last frame. ``clips``: clips drawn from each record, each
    with its own start, box and flip (contrastive pairs): [clips, T, C, H,
    W]; 1 (the default) gives [T, C, H, W]. In evaluation nothing is drawn,
    so the clips are alike.

    ``record``: ``"msgpack"`` (the default): a map whose ``field``
    (``"frames"``, as ``convert --from video_folder`` writes) holds the
    frames, or a msgpack list that is the frames themselves (CoCLR's
    ``msgpack.dumps([jpeg, ...])``); or a callable returning a list of
    frames (or a tuple), or ``(frames, target)``. Every other argument is
    :class:`ImageDecode`'s.
    """

    def __init__(self, size, *, frames=8, stride=1, clips=1, record="msgpack", field="frames", **options):
        if options.get("crops") is not None or options.get("views") is not None:
            raise ValueError("ClipDecode takes no crops: a clip's frames share one box")
        if record in ("raw", "caffe"):
            raise ValueError(f"a clip's frames come from a msgpack list or map, or a callable; got record={record!r}")
        super().__init__(size, record=record, field=field, **options)
        for what, value in (("frames", frames), ("stride", stride), ("clips", clips)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= value <= 4096:
                raise ValueError(f"{what} must be an integer from 1 to 4096; got {value!r}")
        if self.field is None and self.record == "msgpack":
            raise ValueError("a clip's frames come from a msgpack field: field must name it")
        self.frames, self.stride, self.clips = int(frames), int(stride), int(clips)

    _returned_type = (list,)
    _field_kind = "a list of encoded frames"
    _list_is_frames = True

    @property
    def sample_shape(self):
        clip = (self.frames, *self.frame_shape)
        return clip if self.clips == 1 else (self.clips, *clip)

    def __repr__(self):
        return super().__repr__().replace(
            "ImageDecode(", f"ClipDecode(frames={self.frames}, stride={self.stride}, clips={self.clips}, ")

    def decode_records(self, records, out=None, where=None, targets=True):
        chosen, sizes = [], []
        all_frames, found, all_sizes = self._split(records, where, targets, sizes=True)
        for k, frames in enumerate(all_frames):
            if not frames or not all(isinstance(f, (bytes, bytearray, memoryview)) for f in frames):
                raise DecodeError(f"{image_name(where, k)}: {self._frames_source()} holds no list of encoded frames")
            for _ in range(self.clips):
                picked = self._chosen(len(frames))
                chosen += [frames[i] for i in picked]
                sizes += [all_sizes[k][i] for i in picked] if all_sizes is not None else []
        out = self._output(len(records), out)
        owner = lambda s: s // (self.frames * self.clips)  # noqa: E731 (the record frame s is of)
        name = lambda s: image_name(where, owner(s))  # noqa: E731
        if all_sizes is None:  # record=callable: the chosen frames' headers, one call
            with named_errors(name):
                sizes = _core.image_sizes(chosen)
        damaged = [s for s, size in enumerate(sizes) if size[2] == "damaged"]
        if damaged:  # a header the split could not read, read again for its error
            with named_errors(lambda _: name(damaged[0])):
                _core.image_sizes([chosen[damaged[0]]])
        self._decode_into(CropJobs(chosen, sizes, self._counts, where, owner), out, self.frames)
        return out, (batch_targets(found, where) if targets else None)

    @staticmethod
    def _is_pair(got):
        """(frames, target): frames a list or tuple."""
        return isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], (list, tuple))

    def _frames_source(self):
        if callable(self.record):
            return f"record={fn_name(self.record)}"
        return f"field {self.field!r}"

    def _chosen(self, available):
        span = (self.frames - 1) * self.stride + 1
        room = max(available - span, 0)
        start = torch.randint(0, room + 1, size=(1,), generator=generator()).item() if self.train else room // 2
        return [min(start + t * self.stride, available - 1) for t in range(self.frames)]

