"""Several crops of one image from one decode (multi-crop recipes: DINOv2,
iBOT, DINO, SwAV): :class:`Crop`, and how ``ImageDecode(crops=...)`` draws
and decodes a batch's crops (one ``_core.decode_crops`` call a batch, each
image decoded once)."""

import math
import numbers
import warnings

import torch

from . import _core
from ._draws import generator
from ._colour_ops import ColourDraws, probability
from ._crop_boxes import random_resized_crop
from ._image_checks import ratio_range, side_pair, value_range

#: The most crops ``ImageDecode(crops=...)`` cuts from one image, all Crops together.
MAX_CROPS = _core.image_options()["max_crops_per_decode"]

#: ImageDecode's options that say how one crop is cut and coloured: with
#: crops each Crop has its own, and ImageDecode's are refused.
PER_CROP = ("scale", "ratio", "flip", "resize", "crop_pct", "jitter", "jitter_p", "gray_p", "solarize_p",
            "solarize_threshold", "blur_p", "blur_sigma", "blur_kernel")


class Crop:
    """``n`` crops of each image, for ``ImageDecode(crops=[Crop(...), ...])``:
    torchvision's ``RandomResizedCrop(size, scale, ratio)``,
    ``RandomHorizontalFlip(flip)``, then the colour ops as ImageDecode
    takes them (``jitter``, ``jitter_p``, ``gray_p``, ``blur_p``,
    ``blur_sigma``, ``blur_kernel``, ``solarize_p``,
    ``solarize_threshold``), drawn for each crop in that order. ``size``:
    an int or (height, width); ``n``: 1 to 64 (and the Crops of one decoder
    at most 64 crops in all)."""

    def __init__(self, size, *, n=1, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), flip=0.5, jitter=None, jitter_p=1.0,
                 gray_p=0.0, blur_p=0.0, blur_sigma=(0.1, 2.0), blur_kernel=9, solarize_p=0.0,
                 solarize_threshold=128):
        self.size = side_pair(size, "Crop size")
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or not 1 <= n <= MAX_CROPS:
            raise ValueError(f"Crop n (crops of each image) must be an integer from 1 to {MAX_CROPS}; got {n!r}")
        self.n = int(n)
        self.scale = value_range(scale, "Crop scale", 0.0)
        if self.scale[1] > 1.0:
            raise ValueError(f"Crop scale must lie in (0, 1]; got {scale!r}")
        self.ratio = ratio_range(ratio, "Crop ratio")
        self.flip = probability(flip, "Crop flip")
        self.colour = ColourDraws(jitter, jitter_p, gray_p, solarize_p, solarize_threshold, blur_p, blur_sigma,
                                  blur_kernel)
        self.colour.check_blur_fits(*self.size, "blurs (Crop size)")

    def shape(self, channels, layout):
        """One image's crops: (n, C, H, W), or (n, H, W, C) for "HWC"."""
        h, w = self.size
        return (self.n, channels, h, w) if layout == "CHW" else (self.n, h, w, channels)

    def draw(self, width, height):
        """One crop of a width x height image: (box, flip, colour ops or
        None), drawn as ImageDecode draws a sample (RandomResizedCrop's
        box, the flip, the colour ops) with torch's generator."""
        box = random_resized_crop(width, height, self.scale, self.ratio)
        flip = self.flip > 0 and torch.rand(1, generator=generator()).item() < self.flip
        return box, flip, self.colour.draw() if self.colour.active else None

    def __repr__(self):
        return (f"lmdbloader.Crop({self.size}, n={self.n}, scale={self.scale}, ratio={self.ratio}, "
                f"flip={self.flip}, {self.colour!r})")


#: What the former names say when used: ImageDecode(views=...) and View.
RENAMED = ("ImageDecode(views=[View(...)]) is now ImageDecode(crops=[Crop(...)]): the former names still work "
           "and will be removed; in lmdbloader a view is a zero-copy read (LmdbDataset(views=True))")


def crops_or_views(crops, views):
    """ImageDecode's crops=, or views= (its former name) with a DeprecationWarning."""
    if views is None:
        return crops
    if crops is not None:
        raise ValueError("give ImageDecode crops= alone: views= is its former name")
    warnings.warn(RENAMED, DeprecationWarning, stacklevel=3)
    return views


def former_name(name, module):
    """A module's ``__getattr__``: View (Crop's former name) with a DeprecationWarning."""
    if name == "View":
        warnings.warn(RENAMED, DeprecationWarning, stacklevel=3)
        return Crop
    raise AttributeError(f"module {module!r} has no attribute {name!r}")


def crop_list(crops, size, train, options, defaults):
    """ImageDecode's ``crops``, checked: a tuple of Crop. ``options``:
    ImageDecode's PER_CROP options as given, ``defaults`` their defaults."""
    if not train:
        raise ValueError("crops are random crops for training: ImageDecode(crops=...) takes no train=False "
                         "(evaluate with ImageDecode(size, train=False))")
    if size is not None:
        raise ValueError("give ImageDecode a size or crops, not both: with crops each Crop has its size")
    given = [name for name in PER_CROP if options[name] != defaults[name]]
    if given:
        raise ValueError(f"with crops, {', '.join(given)} belong to each Crop (lmdbloader.Crop(size, ...)), "
                         "not to ImageDecode")
    if isinstance(crops, Crop) or not isinstance(crops, (list, tuple)) or not crops or \
            not all(isinstance(c, Crop) for c in crops):
        raise ValueError(f"crops must be a non-empty list of lmdbloader.Crop; got {crops!r}")
    count = sum(c.n for c in crops)
    if count > MAX_CROPS:
        raise ValueError(f"crops cut {count} crops from each image; at most {MAX_CROPS}")
    return tuple(crops)


def output_tensors(shapes, dtype, out, many):
    """A decoder's output: ``out`` checked, or made (with ``many``, a
    tuple of tensors of ``shapes``; else one tensor of shapes[0])."""
    outs = [torch.empty(s, dtype=dtype) for s in shapes] if out is None else list(out) if many else [out]
    for o, shape in zip(outs, shapes):
        if not isinstance(o, torch.Tensor) or o.dtype != dtype or not o.is_contiguous() or \
                o.numel() != math.prod(shape) or len(outs) != len(shapes):
            got = f"{o.dtype} {tuple(o.shape)}" if isinstance(o, torch.Tensor) else type(o).__name__
            raise ValueError(f"out must be {'one ' if many else 'a '}contiguous {dtype} tensor of "
                             f"{shapes if many else shapes[0]}{' each' if many else ''}; got {got}")
    if len(outs) != len(shapes):
        raise ValueError(f"out must be {len(shapes)} tensors, one a Crop; got {len(outs)}")
    return tuple(outs) if many else outs[0]


def decode_multi_crop(crops, jobs, outs, options):
    """Each source of ``jobs`` (a CropJobs, one source an image) cut into
    every Crop's crops, into ``outs`` (one tensor of (images, *Crop.shape)
    per Crop): an image's crops together, so one decode_crops call decodes
    each image once. The draws: per image, per Crop in order, per crop,
    torchvision's order."""
    for k, (width, height) in enumerate(jobs.sizes):
        for c, crop in enumerate(crops):
            for j in range(crop.n):
                jobs.add(k, *crop.draw(width, height), c, k * crop.n + j)
    jobs.decode([(out.numpy(), crop.size[1], crop.size[0]) for out, crop in zip(outs, crops)], **options)
    return outs
