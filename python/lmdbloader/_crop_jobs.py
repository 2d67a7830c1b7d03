"""A batch of images as one list of crop jobs, decoded by one
``_core.decode_crops`` call (image_decode.h, DecodeCropJobs): a single
crop, evaluation's padded crop, a clip's frames and multi-crop differ only
in how many jobs an image gets. Each job: its source image, crop box, flip,
colour draws, the output and frame it is written to, and where CenterCrop
pads, the rectangle of the frame the crop fills."""

from . import _core
from ._image_records import image_name, pil_rgb
from .errors import DecodeError


def core_call(name, fn, *args, **options):
    """``fn(*args, **options)`` (a batched _core call), its DecodeError
    re-raised naming the record ``name(batch_index)`` it is about."""
    try:
        return fn(*args, **options)
    except DecodeError as e:
        raise DecodeError(f"{name(getattr(e, 'batch_index', 0))}: {e}") from None


class CropJobs:
    """The batch's sources and the jobs cut from them, in the order they
    are drawn: a source's jobs next to each other."""

    def __init__(self, counts, where):
        self._counts, self.where = counts, where
        self.sources, self.jobs = [], []
        self._owners = []  # the sample each source belongs to, which errors name

    def add_source(self, image, width, height, kind, k):
        """Image (of sample ``k``, ``kind`` as _core.image_sizes gives it) as
        the next source; returns (its index, width, height). A format the JPEG
        path does not decode is decoded here by PIL, once."""
        if kind == "other":
            image = pil_rgb(image, self.where, k)
            height, width = image.shape[:2]
            kind = "pil"
        self._counts[kind] += 1
        self.sources.append(image)
        self._owners.append(k)
        return len(self.sources) - 1, width, height

    def add(self, source, box, flip, colour, output=0, frame=0, inside=None):
        """A crop of ``source`` into frame ``frame`` of output ``output``;
        ``inside``: (x, y, width, height) of the frame it fills, None for all."""
        self.jobs.append((source, box, flip, colour, output, frame, inside))

    def decode(self, outs, **options):
        """Every job into ``outs`` ((numpy array, width, height) each), one call."""
        core_call(lambda s: image_name(self.where, self._owners[s]), _core.decode_crops, self.sources, self.jobs,
                  outs, **options)
