"""The image bench's recipes (bench/image_bench.py): their constants, the
torchvision transforms and py-lmdb dataset users write, lmdbloader's fused
decoder of each recipe, and the cost of the pickles the baseline reads."""

import io
import os
import pickle
import statistics
import sys
import time

# The py-lmdb baseline lives with the tests (tests/python/pylmdb_baseline.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from pylmdb_baseline import PyLmdbRecords  # noqa: E402

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SCALE = (0.08, 1.0)
RATIO = (3 / 4, 4 / 3)
# open_clip's training transform (open_clip/transform.py, constants.py): OPENAI_DATASET_MEAN / _STD,
# RandomResizedCrop(224, scale=(0.9, 1.0), interpolation=BICUBIC), no flip.
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
CLIP_SCALE = (0.9, 1.0)
# parseq / ABINet-style text-line input: Resize((32, 128)) squashing, bicubic, one channel.
OCR_SIZE = (32, 128)
# SimCLR / BYOL-like colour (no blur): RandomApply([ColorJitter(0.4, 0.4, 0.2, 0.1)], 0.8),
# RandomGrayscale(0.2), RandomSolarize(128, 0.2).
JITTER, JITTER_P, GRAY_P, SOLARIZE_P, SOLARIZE_AT = (0.4, 0.4, 0.2, 0.1), 0.8, 0.2, 0.2, 128
# DINOv2's multi-crop: (size, crops, scale, blur probability, solarize probability) of each Crop.
DINOV2_CROPS = ((224, 1, (0.32, 1.0), 1.0, 0.0), (224, 1, (0.32, 1.0), 0.1, 0.2), (96, 8, (0.05, 0.32), 0.5, 0.0))

RECIPES = {
    "train": {"corpus": "images", "unit": "images", "shape": (3, 224, 224)},
    "eval": {"corpus": "images", "unit": "images", "shape": (3, 224, 224)},
    "clip-train": {"corpus": "images", "unit": "images", "shape": (3, 224, 224)},
    "ocr": {"corpus": "images", "unit": "images", "shape": (1,) + OCR_SIZE},
    "ocr-lines": {"corpus": "lines", "unit": "images", "shape": (1,) + OCR_SIZE},
    "colour": {"corpus": "images", "unit": "images", "shape": (3, 224, 224)},
    "dinov2": {"corpus": "images", "unit": "images",
               "shape": tuple((n, 3, size, size) for size, n, *_ in DINOV2_CROPS)},
    "clip": {"corpus": "clips", "unit": "clips", "shape": (8, 3, 112, 112)},
    "coclr": {"corpus": "coclr", "unit": "videos", "shape": (2, 16, 3, 112, 112)},
}
VARIANTS = {
    "pylmdb": "py-lmdb + torchvision + default_collate",
    "lmdb-tv": "LmdbDataset(decode=torchvision fn) + lmdbloader.collate",
    "fused-loader": "LmdbDataset(decode=fused) + lmdbloader.DataLoader",
    "fused-collate": "LmdbDataset(decode=fused) + DataLoader + lmdbloader.collate",
    "fused-pickle": "LmdbDataset(py-lmdb's pickles, record=pickle.loads) + lmdbloader.DataLoader",
    "fused-threads": "LmdbDataset(decode=fused) + lmdbloader.DataLoader(worker_method='thread')",
    "dali": "DALI CPU-only (2 threads)",
}
BASELINE = "pylmdb"
FUSED_API = {"train": "ImageDecode", "eval": "ImageDecode", "clip-train": "ImageDecode", "ocr": "ImageDecode",
             "ocr-lines": "ImageDecode",
             "colour": "ImageDecode", "dinov2": "ImageDecode", "clip": "ClipDecode", "coclr": "ClipDecode"}
# Recipes whose output is fixed by the image (the rest are compared with torch seeded alike per image).
DETERMINISTIC = ("eval", "ocr", "ocr-lines")
# The OCR recipe over photographs (the image corpus) and over word crops (the lines corpus).
OCR = ("ocr", "ocr-lines")
FUSED = ("fused-loader", "fused-collate", "fused-pickle", "fused-threads")
# CoCLR's pretraining draws (TengdaHan/CoCLR: utils/augmentation.py RandomSizedCrop's
# bottom_area=0.2 and aspect 3/4-4/3; dataset/lmdb_dataset.py double_sampler): two clips of
# COCLR_FRAMES consecutive frames (ds=1), resized to COCLR_SIZE (16 frames of 112 here;
# CoCLR's script defaults to seq_len=32, img_dim=128).
COCLR_FRAMES, COCLR_CLIPS, COCLR_SIZE, COCLR_SCALE = 16, 2, 112, (0.2, 1.0)


# ------------------------------------------------------------ decoding as users write it

def pil_rgb(jpeg):
    from PIL import Image
    return Image.open(io.BytesIO(jpeg)).convert("RGB")


def torchvision_transform(recipe):
    """The recipe's torchvision transform: PIL image -> tensor (train, eval),
    list of PIL frames -> [T, C, H, W] (clip)."""
    from torchvision_cpu import import_torchvision
    import_torchvision()
    import torch
    import torchvision.transforms as T
    import torchvision.transforms.functional as F
    if recipe == "train":
        return T.Compose([T.RandomResizedCrop(224, scale=SCALE, ratio=RATIO), T.RandomHorizontalFlip(),
                          T.ToTensor(), T.Normalize(MEAN, STD)])
    if recipe == "eval":
        return T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), T.Normalize(MEAN, STD)])
    bicubic = T.InterpolationMode.BICUBIC
    if recipe == "clip-train":
        return T.Compose([T.RandomResizedCrop(224, scale=CLIP_SCALE, interpolation=bicubic), T.ToTensor(),
                          T.Normalize(CLIP_MEAN, CLIP_STD)])
    if recipe in OCR:
        # Grayscale first (PIL's convert("L")), as a text-line loader opening images in "L" mode.
        return T.Compose([T.Grayscale(), T.Resize(OCR_SIZE, interpolation=bicubic), T.ToTensor(),
                          T.Normalize(0.5, 0.5)])
    if recipe == "colour":
        return T.Compose([T.RandomResizedCrop(224, scale=SCALE, ratio=RATIO, interpolation=bicubic),
                          T.RandomHorizontalFlip(), T.RandomApply([T.ColorJitter(*JITTER)], p=JITTER_P),
                          T.RandomGrayscale(GRAY_P), T.RandomSolarize(SOLARIZE_AT, p=SOLARIZE_P), T.ToTensor(),
                          T.Normalize(MEAN, STD)])
    if recipe == "dinov2":
        crops = []
        for size, n, scale, blur_p, solarize_p in DINOV2_CROPS:
            blur = T.GaussianBlur(9, sigma=(0.1, 2.0))
            steps = [T.RandomResizedCrop(size, scale=scale, interpolation=bicubic), T.RandomHorizontalFlip(),
                     T.RandomApply([T.ColorJitter(*JITTER)], p=JITTER_P), T.RandomGrayscale(GRAY_P),
                     blur if blur_p == 1 else T.RandomApply([blur], p=blur_p)]
            if solarize_p:
                steps.append(T.RandomSolarize(SOLARIZE_AT, p=solarize_p))
            crops.append((n, T.Compose(steps + [T.ToTensor(), T.Normalize(MEAN, STD)])))

        def dinov2(image):
            # Each crop its own pass from the PIL image, as DINOv2's DataAugmentationDINO makes them.
            return tuple(torch.stack([transform(image) for _ in range(n)]) for n, transform in crops)
        return dinov2

    def clip(frames):
        # One box and one flip for the clip, drawn as RandomResizedCrop draws them.
        top, left, h, w = T.RandomResizedCrop.get_params(frames[0], SCALE, RATIO)
        flip = torch.rand(1).item() < 0.5
        out = []
        for f in frames:
            f = F.resized_crop(f, top, left, h, w, [112, 112])
            if flip:
                f = F.hflip(f)
            out.append(F.normalize(F.to_tensor(f), MEAN, STD))
        return torch.stack(out)
    return clip


class TorchvisionDecode:
    """Record bytes -> (tensor, label) with PIL + torchvision. ``source``:
    "pylmdb" (a pickle of (payload, label)) or "lmdbloader" (the converter's
    msgpack record {image | frames, label, name}). The transform is built in
    the process that first calls it (a worker)."""

    def __init__(self, recipe, source):
        self.recipe, self.source, self.transform = recipe, source, None

    def __call__(self, raw):
        if self.transform is None:
            self.transform = torchvision_transform(self.recipe)
        if self.source == "pylmdb":
            payload, label = pickle.loads(raw)
        else:
            import msgpack
            record = msgpack.unpackb(raw)
            payload, label = record["frames" if self.recipe == "clip" else "image"], record["label"]
        if self.recipe == "clip":
            return self.transform([pil_rgb(f) for f in payload]), label
        return self.transform(pil_rgb(payload)), label

    def __getstate__(self):
        return {"recipe": self.recipe, "source": self.source, "transform": None}


class PyLmdbDataset(PyLmdbRecords):
    """What users write today: py-lmdb opened lazily in each worker, one read
    transaction per sample, keys b"%08d", ``decode`` applied to each value."""

    def __init__(self, path, decode):
        import lmdb
        with lmdb.open(path, readonly=True, lock=False) as env, env.begin() as txn:
            super().__init__(path, int(txn.get(b"__len__")))
        self.decode = decode

    def key(self, i):
        return b"%08d" % i

    def value(self, i, raw):
        return self.decode(raw)


def fused_decode(recipe, record="msgpack"):
    """lmdbloader's fused decoder for the recipe; AttributeError where this build
    has none. ``record``: how the image (frames) and label come out of a
    record: "msgpack" (the converter's maps) or pickle.loads (py-lmdb's pickles)."""
    import lmdbloader
    import torch
    common = dict(mean=MEAN, std=STD, dtype=torch.float32, layout="CHW")
    fields = dict(record=record) if record != "msgpack" else {}
    if recipe == "train":
        return lmdbloader.ImageDecode(224, train=True, scale=SCALE, ratio=RATIO, flip=0.5, field="image",
                                      target="label", **fields, **common)
    if recipe == "eval":
        return lmdbloader.ImageDecode(224, train=False, resize=256, field="image", target="label", **fields,
                                      **common)
    if recipe == "clip-train":
        return lmdbloader.ImageDecode(224, train=True, scale=CLIP_SCALE, ratio=RATIO, flip=0.0,
                                      interpolation="bicubic", **fields,
                                      **dict(common, mean=CLIP_MEAN, std=CLIP_STD))
    if recipe in OCR:
        return lmdbloader.ImageDecode(OCR_SIZE, train=False, resize=OCR_SIZE, interpolation="bicubic",
                                      grayscale=True, **fields, **dict(common, mean=(0.5,), std=(0.5,)))
    if recipe == "colour":
        return lmdbloader.ImageDecode(224, train=True, scale=SCALE, ratio=RATIO, flip=0.5, interpolation="bicubic",
                                      jitter=JITTER, jitter_p=JITTER_P, gray_p=GRAY_P, solarize_p=SOLARIZE_P,
                                      solarize_threshold=SOLARIZE_AT, **fields, **common)
    if recipe == "dinov2":
        # Crop and crops=; View and views= in builds before the rename (a run against an older tree).
        crop, keyword = (lmdbloader.Crop, "crops") if hasattr(lmdbloader, "Crop") else (lmdbloader.View, "views")
        crops = [crop(size, n=n, scale=scale, ratio=RATIO, flip=0.5, jitter=JITTER, jitter_p=JITTER_P, gray_p=GRAY_P,
                      blur_p=blur_p, solarize_p=solarize_p, solarize_threshold=SOLARIZE_AT)
                 for size, n, scale, blur_p, solarize_p in DINOV2_CROPS]
        return lmdbloader.ImageDecode(**{keyword: crops}, interpolation="bicubic", **fields, **common)
    if recipe == "coclr":
        # A msgpack list is the frames; the labels come from targets=.
        return lmdbloader.ClipDecode(COCLR_SIZE, frames=COCLR_FRAMES, clips=COCLR_CLIPS, train=True,
                                     scale=COCLR_SCALE, ratio=RATIO, flip=0.5, **common)
    return lmdbloader.ClipDecode(112, frames=8, train=True, scale=SCALE, ratio=RATIO, flip=0.5, **fields, **common)


def pickle_keys(paths):
    """The samples of py-lmdb's corpus: its keys b"%08d" (b"__len__" left out)."""
    import lmdb
    with lmdb.open(paths["pylmdb"], readonly=True, lock=False) as env, env.begin() as txn:
        n = int(txn.get(b"__len__"))
    return [b"%08d" % i for i in range(n)]


def pickle_cost(paths, rounds=5):
    """pickle.loads on every record of py-lmdb's corpus: microseconds a record
    (median of ``rounds`` passes over the records, read into memory first)."""
    import lmdb
    keys = pickle_keys(paths)
    with lmdb.open(paths["pylmdb"], readonly=True, lock=False) as env, env.begin() as txn:
        records = [bytes(txn.get(k)) for k in keys]
    passes = []
    for _ in range(rounds):
        t = time.perf_counter()
        for r in records:
            pickle.loads(r)
        passes.append((time.perf_counter() - t) / len(records) * 1e6)
    return {"us_per_record": statistics.median(passes), "passes_us": passes, "records": len(records),
            "mean_record_bytes": sum(map(len, records)) / len(records)}
