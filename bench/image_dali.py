"""DALI's CPU-only pipeline of each image-bench recipe that has one (an
anchor beside the fused path, not the same pixels)."""

import importlib.util
import warnings

from image_recipes import CLIP_MEAN, CLIP_SCALE, CLIP_STD, MEAN, OCR, OCR_SIZE, RATIO, SCALE, STD


def have_dali():
    try:
        return importlib.util.find_spec("nvidia.dali") is not None
    except ModuleNotFoundError:  # no "nvidia" package at all
        return False


def dali_iterator(recipe, paths, batch, threads, seed):
    """DALI's CPU-only pipeline for the recipe (device_id=None: no GPU is
    used or needed) as a torch iterator of one epoch per pass."""
    # The sequence reader is deprecated (DALI's video readers take encoded video, not frame files);
    # DALI shows that warning whatever the filters say, so it is dropped where it is shown.
    show = warnings.showwarning

    def quiet(message, *args, **kwargs):
        if "readers.sequence" not in str(message):
            show(message, *args, **kwargs)
    warnings.showwarning = quiet
    import nvidia.dali.fn as fn
    import nvidia.dali.types as types
    from nvidia.dali import pipeline_def
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy
    mean, std = [m * 255 for m in MEAN], [s * 255 for s in STD]

    @pipeline_def(batch_size=batch, num_threads=threads, device_id=None, seed=seed)
    def pipeline():
        if recipe == "clip":
            # The sequence reader decodes each stream's frames (CPU); one
            # random box per sequence, one flip per sequence.
            frames = fn.readers.sequence(file_root=paths["streams"], sequence_length=8, random_shuffle=True,
                                         name="Reader")
            frames = fn.random_resized_crop(frames, size=[112, 112], random_area=list(SCALE),
                                            random_aspect_ratio=list(RATIO), num_attempts=10)
            return fn.crop_mirror_normalize(frames, dtype=types.FLOAT, output_layout="FCHW", mean=mean, std=std,
                                            mirror=fn.random.coin_flip(probability=0.5))
        jpegs, labels = fn.readers.file(file_root=paths["folder"], random_shuffle=True, name="Reader")
        if recipe == "clip-train":
            # open_clip's crop: area 0.9-1.0, bicubic, no flip, OpenAI's mean and std.
            images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                                   random_area=list(CLIP_SCALE), random_aspect_ratio=list(RATIO),
                                                   num_attempts=10)
            images = fn.resize(images, resize_x=224, resize_y=224, interp_type=types.INTERP_CUBIC, antialias=True)
            images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                              mean=[m * 255 for m in CLIP_MEAN], std=[s * 255 for s in CLIP_STD])
        elif recipe in OCR:
            # One channel decoded (libjpeg's luma), squashed to 32 x 128 whatever the aspect, bicubic.
            images = fn.decoders.image(jpegs, device="cpu", output_type=types.GRAY)
            images = fn.resize(images, resize_x=OCR_SIZE[1], resize_y=OCR_SIZE[0], interp_type=types.INTERP_CUBIC,
                               antialias=True)
            images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", mean=[127.5],
                                              std=[127.5])
        elif recipe == "train":
            images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                                   random_area=list(SCALE), random_aspect_ratio=list(RATIO),
                                                   num_attempts=10)
            images = fn.resize(images, resize_x=224, resize_y=224)
            mirror = fn.random.coin_flip(probability=0.5)
            images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", mean=mean, std=std,
                                              mirror=mirror)
        else:
            images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
            images = fn.resize(images, resize_shorter=256)
            images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", crop=(224, 224),
                                              mean=mean, std=std)
        return images, labels

    names = ["data"] if recipe == "clip" else ["data", "label"]
    return DALIGenericIterator(pipeline(), names, reader_name="Reader", last_batch_policy=LastBatchPolicy.DROP,
                               auto_reset=True)
