"""A batch of images as one list of crop jobs, decoded by one
``_core.decode_crops`` call (image_decode.h, DecodeCropJobs): a single
crop, evaluation's padded crop, a clip's frames and multi-crop differ only
in how many jobs an image gets. Each job: its source image, crop box, flip,
colour draws, the output and frame it is written to, and where CenterCrop
pads, the rectangle of the frame the crop fills.

The images travel once: from the batched split into ``CropJobs``, then
into the core. What draws the jobs sees only each source's width and
height."""

import contextlib

from . import _core
from ._image_records import image_name, pil_rgb
from .errors import DecodeError


@contextlib.contextmanager
def named_errors(name):
    """Around a batched _core call: its DecodeError re-raised naming the
    record ``name(batch_index)`` it is about (the one re-wrap of the image
    path; a context, so that the batch goes to the core straight)."""
    try:
        yield
    except DecodeError as e:
        raise DecodeError(f"{name(getattr(e, 'batch_index', 0))}: {e}") from None


class CropJobs:
    """The batch's sources (``images``, as the split gave them, each with
    its (width, height, kind) in ``sizes``) and the jobs cut from them, a
    source's jobs next to each other. ``owner(s)``: the sample source ``s``
    belongs to, which errors name through ``where``."""

    def __init__(self, images, sizes, counts, where, owner=None):
        self.where, self.owner = where, owner or (lambda s: s)
        self.sources, self.sizes, self.jobs = list(images), [], []
        for s, (width, height, kind) in enumerate(sizes):
            if kind == "other":
                # A format the JPEG path does not decode: PIL's RGB, decoded once.
                self.sources[s] = pil_rgb(self.sources[s], where, self.owner(s))
                height, width = self.sources[s].shape[:2]
                kind = "pil"
            counts[kind] += 1
            self.sizes.append((width, height))

    def add(self, source, box, flip, colour, output=0, frame=0, inside=None):
        """A crop of ``source`` into frame ``frame`` of output ``output``;
        ``inside``: (x, y, width, height) of the frame it fills, None for all."""
        self.jobs.append((source, box, flip, colour, output, frame, inside))

    def decode(self, outs, **options):
        """Every job into ``outs`` ((numpy array, width, height) each), one call."""
        with named_errors(lambda s: image_name(self.where, self.owner(s))):
            _core.decode_crops(self.sources, self.jobs, outs, **options)
