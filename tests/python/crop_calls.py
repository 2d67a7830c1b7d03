"""The image tests' calls of the one decoding entry point, _core.decode_crops,
in the shapes they compare: a batch of images, one crop each, into one output
(decode_images), and RGB pixels decoded elsewhere, cut once (resample_rgb).
Both are a list of crop jobs as ImageDecode writes them; nothing here decodes.
"""

from lmdbloader import _core

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def decode_images(images, boxes, flips, out, out_width, out_height, layout="CHW", dtype="float32", mean=MEAN,
                  std=STD, scale_in_idct=True, interpolation="bilinear", grayscale=False, colours=None):
    """images[i] cropped to boxes[i] ((left, top, width, height)), mirrored
    where flips[i] (flips None: none), colours[i] applied (None: none), into
    frame i of ``out`` (out_width x out_height frames one after another)."""
    jobs = [(i, box, bool(flips[i]) if flips is not None else False, colours[i] if colours is not None else None,
             0, i, None) for i, box in enumerate(boxes)]
    _core.decode_crops(images, jobs, [(out, out_width, out_height)], layout, dtype, mean, std, scale_in_idct,
                       interpolation, grayscale)


def resample_rgb(pixels, box, flip, out, out_width, out_height, layout="CHW", dtype="float32", mean=MEAN, std=STD,
                 interpolation="bilinear", grayscale=False, colour=None):
    """RGB pixels ((height, width, 3) uint8) cut to ``box`` into ``out``."""
    decode_images([pixels], [box], [flip], out, out_width, out_height, layout, dtype, mean, std, True,
                  interpolation, grayscale, None if colour is None else [colour])


def image_size(data):
    """(width, height, kind) of one image, as the batched split reads it."""
    return tuple(_core.image_sizes([data])[0])
