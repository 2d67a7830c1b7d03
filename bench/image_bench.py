"""Image and video-clip jobs in DataLoader workers: py-lmdb + PIL + torchvision
against lmdbloader's dataset with the same decoding, its fused decode path
(lmdbloader.ImageDecode / ClipDecode, where this build has it) and DALI's
CPU-only pipeline (where installed), in one run.

Recipes (2 persistent workers, batch 32, shuffled, 3 epochs):
- ``train``: RandomResizedCrop(224), RandomHorizontalFlip, ToTensor,
  Normalize(ImageNet mean/std) -> float32 [3, 224, 224], over 2,048 JPEG
  photographs 350-500 px on the long side (~88 KB at quality 90);
- ``eval``: Resize(256), CenterCrop(224), ToTensor, Normalize, same images;
- ``clip-train``: open_clip's RandomResizedCrop(224, scale=(0.9, 1.0),
  bicubic), no flip, ToTensor, Normalize(OpenAI's mean/std), same images;
- ``ocr``: Grayscale, Resize((32, 128)) squashing, bicubic, ToTensor,
  Normalize(0.5, 0.5) -> float32 [1, 32, 128], same images;
- ``ocr-lines``: the same OCR recipe over word crops as synthetic OCR corpora
  (MJSynth) store them: a word over a photograph's crop, 32 px high, 50-250
  px wide, 2-6 KB (the ``lines`` corpus: bench/image_corpus.py);
- ``colour``: RandomResizedCrop(224, bicubic), flip, RandomApply([ColorJitter(
  0.4, 0.4, 0.2, 0.1)], 0.8), RandomGrayscale(0.2), RandomSolarize(128, 0.2),
  ToTensor, Normalize(ImageNet), same images;
- ``dinov2``: DINOv2's multi-crop (dinov2/data/augmentations.py): per image
  two global crops RandomResizedCrop(224, scale=(0.32, 1), bicubic) and
  eight local ones (96, scale=(0.05, 0.32)), each flipped (0.5),
  RandomApply([ColorJitter(0.4, 0.4, 0.2, 0.1)], 0.8), RandomGrayscale(0.2),
  GaussianBlur(9, (0.1, 2)) (always on global crop 1, 0.1 on global crop 2,
  0.5 on the locals), RandomSolarize(128, 0.2) on global crop 2, ToTensor,
  Normalize(ImageNet) -> float32 [1, 3, 224, 224] x 2 and [8, 3, 96, 96];
  the fused path is ImageDecode(views=[View(...), ...]) (one decode an
  image), torchvision's a per-crop transform of the PIL image; same images;
- ``clip``: 1,024 clips of 8 frames 320x240 -> one RandomResizedCrop box and
  one flip for the whole clip, 112x112 -> float32 [8, 3, 112, 112];
- ``coclr``: CoCLR's two-clip pretraining input over a corpus in its layout
  (one LMDB file, a msgpack list of 128x171 JPEG frames per video under its
  9-digit id, the train split's videos and labels from CSV files beside it):
  two clips of 16 consecutive frames, each from its own random start, box
  (scale 0.2-1, as CoCLR's bottom_area) and flip, 112x112 -> float32
  [2, 16, 3, 112, 112]; every video of the split once an epoch.
Variants per recipe:
1. ``pylmdb``: py-lmdb opened lazily in each worker (a pickle of (JPEG bytes,
   label) per key, as users write one), PIL + torchvision, default_collate:
   the baseline (1.00x); for ``coclr``, a Dataset doing what CoCLR's
   UCF101LMDB_2CLIP does (py-lmdb, msgpack, PIL, per-frame torchvision);
2. ``lmdb-tv``: lmdbloader.LmdbDataset(decode=the same PIL + torchvision
   function), collate_fn=lmdbloader.collate;
3. ``fused-loader``: LmdbDataset(decode=lmdbloader.ImageDecode(...)) under
   lmdbloader.DataLoader (decoded straight into ring slots); for ``coclr``,
   LmdbDataset(keys=the split's videos, targets=their labels,
   decode=ClipDecode(112, frames=16, clips=2), rss_budget=--rss-budget);
4. ``fused-collate``: the same dataset under torch's DataLoader with
   collate_fn=lmdbloader.collate;
5. ``fused-pickle``: variant 3 reading variant 1's LMDB as it is, the
   pickles split by ``record=pickle.loads`` and the samples named by
   ``keys=[b"%08d" % i ...]`` (train, eval, clip);
6. ``dali``: DALI's CPU-only pipeline (device_id=None, 2 threads) over the
   folder of files: fused crop-decode, resize, crop_mirror_normalize (the
   clip recipe: its sequence reader over the frame folders; clip-train:
   area 0.9-1.0, cubic antialiased resize, no flip; ocr: decoded to gray,
   squashed to 32x128 by the cubic resize, normalized 0.5 / 0.5). An anchor,
   not the same pixels: DALI's filters and its gray (libjpeg's Y plane) are
   not PIL's.
7. ``fused-threads``: variant 3 with ``worker_method="thread"``: the workers
   are threads of the main process (no worker processes, one Reader).
3-5 and 7 are skipped with a note where lmdbloader has no ImageDecode /
ClipDecode, 6 where DALI is not installed (it is an optional, large wheel:
``pip install -c constraints.txt nvidia-dali-cuda130``) and for colour (no
DALI pipeline is written for it).
With variant 5 the cost of ``pickle.loads`` on the corpus's records is
timed in the parent (microseconds a record) and reported beside its rate.

Each run is a fresh process (no variant's libraries or arenas are counted in
another's), the page cache warm; variants alternate, ``--repeats`` rounds.
Figures are medians: of epochs 2-3 within a run (the first starts the
workers), then over rounds, with the ratio to variant 1 taken within each
round. Also reported: each worker's and the main process's peak RSS and PSS, the
job's (every process of it summed at each sample)
(lmdbloader.memory, from /proc; for ``coclr`` also the RSS of the data
file's mappings, each worker's peak in epoch 1 and after, and the reader's
rss_budget), and the peak of /dev/shm the job holds: the
files under /dev/shm its processes have open or mapped (the filesystem's own
count, statvfs, includes other programs' use and is kept in the JSON). Writes
bench/out/image_bench.json and .png.

    python bench/image_bench.py [--recipes train,eval,clip-train,ocr,ocr-lines,colour,dinov2,clip,coclr] [--variants pylmdb,...]
                                [--repeats 3] [--videos 384] [--rss-budget 64MiB]
                                [--workdir bench/out/image_corpora] [--out bench/out]
    python bench/image_bench.py --demo     # train recipe, variants 1, 3 and 7 (else 1 and 2), 1,024 images
"""

import argparse
import gc
import importlib.util
import io
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
from batch_probes import dev_shm_used, touch  # noqa: E402

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
# DINOv2's multi-crop: (size, crops, scale, blur probability, solarize probability) of each view.
DINOV2_VIEWS = ((224, 1, (0.32, 1.0), 1.0, 0.0), (224, 1, (0.32, 1.0), 0.1, 0.2), (96, 8, (0.05, 0.32), 0.5, 0.0))

RECIPES = {
    "train": {"corpus": "images", "unit": "images", "shape": (3, 224, 224)},
    "eval": {"corpus": "images", "unit": "images", "shape": (3, 224, 224)},
    "clip-train": {"corpus": "images", "unit": "images", "shape": (3, 224, 224)},
    "ocr": {"corpus": "images", "unit": "images", "shape": (1,) + OCR_SIZE},
    "ocr-lines": {"corpus": "lines", "unit": "images", "shape": (1,) + OCR_SIZE},
    "colour": {"corpus": "images", "unit": "images", "shape": (3, 224, 224)},
    "dinov2": {"corpus": "images", "unit": "images",
               "shape": tuple((n, 3, size, size) for size, n, *_ in DINOV2_VIEWS)},
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
             "colour": "ImageDecode", "dinov2": "View", "clip": "ClipDecode", "coclr": "ClipDecode"}
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

def _pil(jpeg):
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
        views = []
        for size, n, scale, blur_p, solarize_p in DINOV2_VIEWS:
            blur = T.GaussianBlur(9, sigma=(0.1, 2.0))
            steps = [T.RandomResizedCrop(size, scale=scale, interpolation=bicubic), T.RandomHorizontalFlip(),
                     T.RandomApply([T.ColorJitter(*JITTER)], p=JITTER_P), T.RandomGrayscale(GRAY_P),
                     blur if blur_p == 1 else T.RandomApply([blur], p=blur_p)]
            if solarize_p:
                steps.append(T.RandomSolarize(SOLARIZE_AT, p=solarize_p))
            views.append((n, T.Compose(steps + [T.ToTensor(), T.Normalize(MEAN, STD)])))

        def dinov2(image):
            # Each crop its own pass from the PIL image, as DINOv2's DataAugmentationDINO makes them.
            return tuple(torch.stack([transform(image) for _ in range(n)]) for n, transform in views)
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
            return self.transform([_pil(f) for f in payload]), label
        return self.transform(_pil(payload)), label

    def __getstate__(self):
        return {"recipe": self.recipe, "source": self.source, "transform": None}


class PyLmdbDataset:
    """What users write today: py-lmdb opened lazily in each worker, one read
    transaction per sample, keys b"%08d"."""

    def __init__(self, path, decode):
        import lmdb
        self.path, self.decode, self.env = path, decode, None
        with lmdb.open(path, readonly=True, lock=False) as env, env.begin() as txn:
            self.n = int(txn.get(b"__len__"))

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.env is None:
            import lmdb
            self.env = lmdb.open(self.path, readonly=True, lock=False, readahead=False, meminit=False)
        with self.env.begin() as txn:
            return self.decode(txn.get(b"%08d" % i))

    def __getstate__(self):
        return {"path": self.path, "decode": self.decode, "env": None, "n": self.n}


def coclr_split(paths, split="train"):
    """The split's videos as CoCLR's dataset reads them: (names "class/video",
    frame counts, labels), from the CSV ("frame/class/video/,frames") and
    ClassInd.txt beside the LMDB."""
    import csv
    with open(paths["classes"]) as f:
        classes = [line.strip() for line in f if line.strip()]
    names, vlens, labels = [], [], []
    with open(paths[f"{split}_csv"], newline="") as f:
        for path, vlen in csv.reader(f):
            parts = path.split("/")  # a trailing "/": the class is parts[-3], the video parts[-2]
            names.append(f"{parts[-3]}/{parts[-2]}")
            vlens.append(int(vlen))
            labels.append(classes.index(parts[-3]))
    return names, vlens, labels


def coclr_clips(frames, clips=COCLR_CLIPS, size=COCLR_SIZE):
    """CoCLR's per-frame transform of ``clips`` clips given as one list of PIL
    frames: for each clip one box (drawn as RandomResizedCrop draws it, scale
    COCLR_SCALE) and one flip shared by its frames, then per frame
    resized_crop, hflip, ToTensor, Normalize -> [clips, T, C, H, W].
    (CoCLR resizes with PIL's bicubic filter and normalizes on the GPU; this
    uses the bilinear filter both variants share and normalizes here.)"""
    from torchvision_cpu import import_torchvision
    import_torchvision()
    import torch
    import torchvision.transforms as T
    import torchvision.transforms.functional as F
    per = len(frames) // clips
    out = []
    for c in range(clips):
        part = frames[c * per:(c + 1) * per]
        top, left, h, w = T.RandomResizedCrop.get_params(part[0], COCLR_SCALE, RATIO)
        flip = torch.rand(1).item() < 0.5
        tensors = []
        for f in part:
            f = F.resized_crop(f, top, left, h, w, [size, size])
            if flip:
                f = F.hflip(f)
            tensors.append(F.normalize(F.to_tensor(f), MEAN, STD))
        out.append(torch.stack(tensors))
    return torch.stack(out)


def coclr_frame_sampler(total, frames=COCLR_FRAMES, ds=1):
    """CoCLR's frame_sampler in training: ``frames`` indices ``ds`` apart from
    a random start, padded on the left with frame 0 when the video is short."""
    import numpy as np
    if total - frames * ds <= 0:
        sequence = np.arange(frames) * ds + np.random.choice(range(ds), 1)
        index = np.zeros_like(sequence)
        sequence = sequence[sequence < total]
        index[-len(sequence):] = sequence
        return index
    start = np.random.choice(range(total - frames * ds), 1)
    return np.arange(frames) * ds + start


class CoclrDataset:
    """What CoCLR's UCF101LMDB_2CLIP does, over its layout: the split's videos
    from the CSV, the key of video "class/video" its position in __order__ as
    9 ASCII digits, msgpack.loads of the record (the list of JPEG frames), two
    clips' frame indices drawn independently, PIL for each frame, the
    per-frame transform (:func:`coclr_clips`). The environment is opened as
    CoCLR opens it (subdir=False, readonly, lock=False, readahead=False,
    meminit=False) but lazily in each worker (CoCLR opens it in __init__ and
    uses it after fork, which LMDB's caveats forbid)."""

    def __init__(self, paths):
        import lmdb
        import msgpack
        self.path = paths["lmdb"]
        with lmdb.open(self.path, subdir=False, readonly=True, lock=False, readahead=False,
                       meminit=False) as env, env.begin() as txn:
            order = msgpack.loads(txn.get(b"__order__"))
        video_id = {name: "%09d" % k for k, name in enumerate(order)}
        names, vlens, labels = coclr_split(paths)
        self.videos = [(video_id[n], v, lab) for n, v, lab in zip(names, vlens, labels)]
        self.env = None

    def __len__(self):
        return len(self.videos)

    def __getitem__(self, i):
        import lmdb
        import msgpack
        import numpy as np
        key, vlen, label = self.videos[i]
        if self.env is None:
            self.env = lmdb.open(self.path, subdir=False, readonly=True, lock=False, readahead=False, meminit=False)
        with self.env.begin(write=False) as txn:
            raw = msgpack.loads(txn.get(key.encode("ascii")))
        index = np.concatenate([coclr_frame_sampler(vlen) for _ in range(COCLR_CLIPS)])
        return coclr_clips([_pil(raw[j]) for j in index]), label

    def __getstate__(self):
        return {"path": self.path, "videos": self.videos, "env": None}


class CoclrDecode:
    """CoclrDataset's work on a record's bytes (msgpack list of frames) ->
    the [clips, T, C, H, W] tensor: LmdbDataset(decode=CoclrDecode()) with
    keys= and targets= from the split."""

    def __call__(self, raw):
        import msgpack
        import numpy as np
        frames = msgpack.loads(raw)
        index = np.concatenate([coclr_frame_sampler(len(frames)) for _ in range(COCLR_CLIPS)])
        return coclr_clips([_pil(frames[j]) for j in index])


def coclr_dataset(paths, decode, **reader_options):
    """LmdbDataset over the CoCLR-layout LMDB: the train split's videos (keys
    from __order__, read through lmdbloader) and labels."""
    import lmdbloader
    import msgpack
    order = msgpack.unpackb(lmdbloader.Reader(paths["lmdb"]).get(b"__order__"))
    key_of = {name: b"%09d" % k for k, name in enumerate(order)}
    names, _, labels = coclr_split(paths)
    return lmdbloader.LmdbDataset(paths["lmdb"], keys=[key_of[n] for n in names], targets=labels, decode=decode,
                                  **reader_options)


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
        views = [lmdbloader.View(size, n=n, scale=scale, ratio=RATIO, flip=0.5, jitter=JITTER, jitter_p=JITTER_P,
                                 gray_p=GRAY_P, blur_p=blur_p, solarize_p=solarize_p, solarize_threshold=SOLARIZE_AT)
                 for size, n, scale, blur_p, solarize_p in DINOV2_VIEWS]
        return lmdbloader.ImageDecode(views=views, interpolation="bicubic", **fields, **common)
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


# ------------------------------------------------------------ one run, in its own process



def dev_shm_held(pids):
    """Bytes of the /dev/shm files that ``pids`` hold open, each file once.
    default_collate's segments are unlinked as soon as they are made, and
    under torch's sharing strategy on Linux ("file_descriptor") every process
    holding one keeps a descriptor of it: they are found through /proc/PID/fd
    (a scan of the descriptors costs about 1 ms; the mappings, 15)."""
    sizes = {}
    for pid in pids:
        try:
            fds = list(os.scandir(f"/proc/{pid}/fd"))
        except OSError:  # gone meanwhile
            continue
        for fd in fds:
            try:
                if os.readlink(fd.path).startswith("/dev/shm/"):
                    st = os.stat(fd.path)
                    sizes[st.st_ino] = st.st_size
            except OSError:
                pass
    return sum(sizes.values())


def _images_of(batch, recipe):
    """The batch's image (or clip) tensor and its labels (None for DALI's clips)."""
    if isinstance(batch, list) and batch and isinstance(batch[0], dict):  # DALI's iterator
        return batch[0]["data"], batch[0].get("label")
    if isinstance(batch, (list, tuple)) and len(batch) == 2:
        return batch[0], batch[1]
    raise TypeError(f"{recipe}: a batch should be (images, labels), got {type(batch).__name__}")


def _count(images):
    """Samples in a batch's images: a tensor, or one tensor a view."""
    return len(images[0]) if isinstance(images, (list, tuple)) else len(images)


def _check_first(batch, recipe, size):
    """Every variant must hand the model the same thing: float32 [B, *shape], B labels."""
    import torch
    images, labels = _images_of(batch, recipe)
    if recipe == "dinov2":  # one tensor a view: [B, n, 3, size, size]
        got = [(tuple(v.shape), v.dtype) for v in images] if isinstance(images, (list, tuple)) else type(images)
        if got != [((size,) + shape, torch.float32) for shape in RECIPES[recipe]["shape"]]:
            raise ValueError(f"{recipe}: the first batch should be float32 views of {RECIPES[recipe]['shape']}, "
                             f"got {got}")
        images = images[0]
    want = (size,) + RECIPES[recipe]["shape"] if recipe != "dinov2" else tuple(images.shape)
    if not isinstance(images, torch.Tensor) or tuple(images.shape) != want or images.dtype != torch.float32:
        got = (tuple(images.shape), images.dtype) if isinstance(images, torch.Tensor) else type(images).__name__
        raise ValueError(f"{recipe}: the first batch should be float32 {list(want)}, got {got}")
    if labels is not None and len(labels) != size:
        raise ValueError(f"{recipe}: the first batch has {len(labels)} labels for {size} samples")


def run_child(spec):
    """Runs one (recipe, variant) and returns its figures."""
    import psutil
    import torch
    import lmdbloader
    from lmdbloader.memory import Sampler

    recipe, variant, paths = spec["recipe"], spec["variant"], spec["paths"]
    batch, workers, epochs = spec["batch"], spec["workers"], spec["epochs"]
    # coclr: every video of the split once an epoch, the last batch short where it must be.
    opts = dict(batch_size=batch, shuffle=True, num_workers=workers, persistent_workers=True,
                drop_last=recipe != "coclr")
    budget = dict(rss_budget=spec["rss_budget"]) if recipe == "coclr" else {}
    ds = None
    if recipe == "coclr" and variant == "pylmdb":
        ds = CoclrDataset(paths)
        loader = torch.utils.data.DataLoader(ds, **opts)
    elif recipe == "coclr" and variant == "lmdb-tv":
        ds = coclr_dataset(paths, CoclrDecode(), **budget)
        loader = torch.utils.data.DataLoader(ds, collate_fn=lmdbloader.collate, **opts)
    elif recipe == "coclr" and variant in ("fused-loader", "fused-collate"):
        ds = coclr_dataset(paths, fused_decode(recipe), **budget)
        if variant == "fused-loader":
            loader = lmdbloader.DataLoader(ds, **opts)
        else:
            loader = torch.utils.data.DataLoader(ds, collate_fn=lmdbloader.collate, **opts)
    elif variant == "pylmdb":
        loader = torch.utils.data.DataLoader(PyLmdbDataset(paths["pylmdb"], TorchvisionDecode(recipe, "pylmdb")),
                                             **opts)
    elif variant == "lmdb-tv":
        ds = lmdbloader.LmdbDataset(paths["corpus"], decode=TorchvisionDecode(recipe, "lmdbloader"))
        loader = torch.utils.data.DataLoader(ds, collate_fn=lmdbloader.collate, **opts)
    elif variant == "fused-loader":
        loader = lmdbloader.DataLoader(lmdbloader.LmdbDataset(paths["corpus"], decode=fused_decode(recipe)), **opts)
    elif variant == "fused-threads":
        loader = lmdbloader.DataLoader(lmdbloader.LmdbDataset(paths["corpus"], decode=fused_decode(recipe)),
                                       worker_method="thread", **opts)
    elif variant == "fused-collate":
        ds = lmdbloader.LmdbDataset(paths["corpus"], decode=fused_decode(recipe))
        loader = torch.utils.data.DataLoader(ds, collate_fn=lmdbloader.collate, **opts)
    elif variant == "fused-pickle":
        # py-lmdb's corpus as it is: each record pickle.dumps((jpeg, label)) (clips: ([jpeg, ...],
        # label)) under b"%08d"; keys= leaves b"__len__" out.
        ds = lmdbloader.LmdbDataset(paths["pylmdb"], keys=pickle_keys(paths),
                                    decode=fused_decode(recipe, record=pickle.loads))
        loader = lmdbloader.DataLoader(ds, **opts)
    elif variant == "dali":
        loader = dali_iterator(recipe, paths, batch, workers, seed=spec["seed"])
    else:
        raise ValueError(f"unknown variant {variant!r}")

    from lmdbloader.memory import children
    shm_base, shm_fs_peak, shm_peak = dev_shm_used(), 0, 0
    stop = threading.Event()

    def watch_shm():
        nonlocal shm_fs_peak, shm_peak
        tick = 0
        while not stop.is_set():
            shm_fs_peak = max(shm_fs_peak, dev_shm_used() - shm_base)
            if tick % 5 == 0:  # 10 Hz: each scan reads every descriptor of the job's processes
                me = os.getpid()
                shm_peak = max(shm_peak, dev_shm_held([me] + children(me)))
            tick += 1
            stop.wait(0.02)

    watcher = threading.Thread(target=watch_shm, daemon=True)
    watcher.start()
    # Sparse: reading smaps_rollup costs CPU the job shares. For coclr also the RSS of the
    # data file's mappings (smaps, each process's every sample).
    match = os.path.basename(paths["lmdb"]) if recipe == "coclr" else None
    sampler = Sampler(interval=0.25, match=match)
    t0 = time.monotonic()
    sampler.start()
    seconds, counts, ends, load = [], [], [], [os.getloadavg()[0]]
    for epoch in range(epochs):
        t, n = time.perf_counter(), 0
        for b in loader:
            if epoch == 0 and n == 0:
                _check_first(b, recipe, batch)
            touch(b)
            n += _count(_images_of(b, recipe)[0])
        seconds.append(time.perf_counter() - t)
        counts.append(n)
        ends.append(time.monotonic() - t0)
    load.append(os.getloadavg()[0])
    me = os.getpid()
    workers_now = set()
    for c in psutil.Process(me).children(recursive=True):
        try:  # multiprocessing's resource tracker is no worker
            if "resource_tracker" not in " ".join(c.cmdline()):
                workers_now.add(c.pid)
        except psutil.NoSuchProcess:
            pass
    samples = sampler.stop()
    stop.set()
    watcher.join()
    if variant in ("fused-loader", "fused-pickle"):
        ring = loader.ring_stats()
    elif variant in ("lmdb-tv", "fused-collate"):
        ring = lmdbloader.collate.stats()
    else:
        ring = {}
    del loader
    gc.collect()

    peaks, job = {}, {}
    for s in samples:  # the job: every process of the tree at one sample, summed
        if s["pid"] == me or s["pid"] in workers_now:
            at = job.setdefault(s["time"], [0, 0])
            at[0], at[1] = at[0] + s["rss"], at[1] + s["pss"]
    for s in samples:
        if s["pid"] != me and s["pid"] not in workers_now:
            continue
        key = "main" if s["pid"] == me else str(s["pid"])
        p = peaks.setdefault(key, {"rss_mib": 0.0, "pss_mib": 0.0, "shmem_mib": 0.0})
        p["rss_mib"] = max(p["rss_mib"], s["rss"] / 2**20)
        p["pss_mib"] = max(p["pss_mib"], s["pss"] / 2**20)
        p["shmem_mib"] = max(p["shmem_mib"], s.get("shmem_rss", 0) / 2**20)
        if match:
            p["file_rss_mib"] = max(p.get("file_rss_mib", 0.0), s.get("match_rss", 0) / 2**20)
            # The peak over epoch 1 and over the epochs after: what a persistent worker keeps growing.
            when = "epoch1_rss_mib" if s["time"] <= ends[0] else "later_rss_mib"
            p[when] = max(p.get(when, 0.0), s["rss"] / 2**20)
    rates = [n / s for n, s in zip(counts[1:], seconds[1:])]
    worker_peaks = [v for k, v in peaks.items() if k != "main"]
    extra = {}
    if recipe == "coclr":
        extra = {"samples_per_epoch": len(ds) if ds is not None else None,
                 "rss_budget_mib": (ds.reader.rss_budget / 2**20
                                    if variant != "pylmdb" and ds is not None else None),
                 "worker_peak_file_rss_mib": max((v.get("file_rss_mib", 0.0) for v in worker_peaks), default=None),
                 "worker_growth_mib": max((v.get("later_rss_mib", 0.0) - v.get("epoch1_rss_mib", 0.0)
                                           for v in worker_peaks), default=None)}
        if ds is not None and any(n != len(ds) for n in counts):
            raise ValueError(f"coclr: an epoch gave {counts} videos; the split has {len(ds)}")
    return {**extra, "items_per_s": statistics.median(rates), "epoch_seconds": seconds, "epoch_items": counts,
            "main_peak": peaks.get("main"), "worker_peaks": worker_peaks,
            "job_peak_rss_mib": max((v[0] for v in job.values()), default=0) / 2**20,
            "job_peak_pss_mib": max((v[1] for v in job.values()), default=0) / 2**20,
            "worker_peak_rss_mib": max((v["rss_mib"] for v in worker_peaks), default=None),
            "worker_peak_pss_mib": max((v["pss_mib"] for v in worker_peaks), default=None),
            "dev_shm_peak_mib": shm_peak / 2**20, "dev_shm_fs_peak_mib": shm_fs_peak / 2**20,
            "ring_mib": ring["worker_ring_bytes"] / 2**20 if ring else None,
            "ring": {k: v for k, v in ring.items() if k != "workers"},
            "loadavg_1min": load}


def child_main(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    warnings.filterwarnings("ignore", message="The given buffer is not writable")
    try:
        result = run_child(spec)
    except Exception as e:  # reported in the table, the other variants go on
        import traceback
        traceback.print_exc()
        result = {"error": f"{type(e).__name__}: {e}"}
    with open(spec["result"], "w") as f:
        json.dump(result, f)


# ------------------------------------------------------------ the parent: corpora, rounds, report

def warm(paths, variant, recipe):
    """Drops the variant's input from the page cache and reads it back sequentially."""
    from conftest import warm_page_cache
    if recipe == "coclr":
        files = [paths["lmdb"]]
    elif variant in ("pylmdb", "fused-pickle"):
        files = [os.path.join(paths["pylmdb"], "data.mdb")]
    elif variant == "dali":
        files = [os.path.join(d, f) for d, _, fs in os.walk(paths["folder"]) for f in sorted(fs)]
    else:
        files = [os.path.join(paths["corpus"], f) for f in sorted(os.listdir(paths["corpus"]))]
    for f in files:
        warm_page_cache(f)


def have_dali():
    try:
        return importlib.util.find_spec("nvidia.dali") is not None
    except ModuleNotFoundError:  # no "nvidia" package at all
        return False


def available(recipe, variant):
    """None where the variant can run here, else why not."""
    if recipe == "coclr" and variant in ("fused-pickle", "dali"):
        return "not part of this recipe (the CoCLR corpus is read as it is by variants 2-4)"
    if variant in FUSED:
        import lmdbloader
        name = FUSED_API[recipe]
        if not hasattr(lmdbloader, name):
            return f"lmdbloader.{name} is missing from this build (the fused decode path)"
    if variant == "dali" and not have_dali():
        return "DALI is not installed (optional: pip install -c constraints.txt nvidia-dali-cuda130)"
    if variant == "dali" and recipe not in ("train", "eval", "clip", "clip-train", *OCR):
        return "no DALI pipeline is written for this recipe (torchvision's colour draws have no exact DALI " \
               "counterpart)"
    return None


def agreement(recipe, paths, variant="fused-loader", n=8):
    """The fused path beside torchvision on the same records: shapes, dtypes
    and labels always; the largest and mean absolute difference for the image
    recipes, deterministic ones (eval, ocr) as they are, random ones with
    torch seeded alike for both before each record (the same boxes, flips and
    colour draws). ``variant`` "fused-pickle": py-lmdb's pickles through
    record=pickle.loads."""
    import lmdbloader
    import torch
    if recipe == "coclr":
        reference = coclr_dataset(paths, CoclrDecode())
        fused = coclr_dataset(paths, fused_decode(recipe))
    elif variant == "fused-pickle":
        keys = pickle_keys(paths)
        reference = lmdbloader.LmdbDataset(paths["pylmdb"], keys=keys, decode=TorchvisionDecode(recipe, "pylmdb"))
        fused = lmdbloader.LmdbDataset(paths["pylmdb"], keys=keys, decode=fused_decode(recipe, record=pickle.loads))
    else:
        reference = lmdbloader.LmdbDataset(paths["corpus"], decode=TorchvisionDecode(recipe, "lmdbloader"))
        fused = lmdbloader.LmdbDataset(paths["corpus"], decode=fused_decode(recipe))
    compare = RECIPES[recipe]["corpus"] in ("images", "lines")
    worst, total, count = 0.0, 0.0, 0
    for i in range(min(n, len(reference))):
        if compare:
            torch.manual_seed(i)
        a, la = reference[i]
        if compare:
            torch.manual_seed(i)
        b, lb = fused[i]
        a, b = (list(x) if isinstance(x, (tuple, list)) else [x] for x in (a, b))  # one tensor a view
        if [(tuple(x.shape), x.dtype) for x in a] != [(tuple(x.shape), x.dtype) for x in b] or int(lb) != int(la):
            return {"ok": False, "why": f"record {i}: torchvision gives {[(x.dtype, list(x.shape)) for x in a]} "
                                        f"label {la}, the fused path {[(x.dtype, list(x.shape)) for x in b]} "
                                        f"label {lb}"}
        if compare:
            for x, y in zip(a, b):
                d = (x - y).abs()
                worst, total, count = max(worst, float(d.max())), total + float(d.sum()), count + d.numel()
    out = {"ok": True, "records": min(n, len(reference)), "shape": [list(x.shape) for x in a] if len(a) > 1 else
           list(a[0].shape), "dtype": str(a[0].dtype)}
    if compare:
        out.update(max_abs_diff=worst, mean_abs_diff=total / count, seeded=recipe not in DETERMINISTIC)
    return out


def run_one(spec, tmp):
    spec_path = os.path.join(tmp, "spec.json")
    spec = dict(spec, result=os.path.join(tmp, "result.json"))
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    if os.path.exists(spec["result"]):
        os.unlink(spec["result"])
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", spec_path])
    try:
        with open(spec["result"]) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"error": f"the run's process exited with status {proc.returncode} and wrote no result"}


def summarize(runs, baseline):
    """Medians over rounds; the ratio to the baseline taken within each round."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return {"error": runs[-1]["error"] if runs else "no run"}

    def med(key):
        values = [r[key] for r in ok if r.get(key) is not None]
        return statistics.median(values) if values else None

    pairs = [(r, b) for r, b in zip(runs, baseline) if "error" not in r and "error" not in b]
    return {
        "items_per_s": med("items_per_s"),
        "ratio": statistics.median(r["items_per_s"] / b["items_per_s"] for r, b in pairs) if pairs else None,
        "worker_peak_rss_mib": med("worker_peak_rss_mib"),
        "worker_peak_pss_mib": med("worker_peak_pss_mib"),
        "main_peak_rss_mib": statistics.median(r["main_peak"]["rss_mib"] for r in ok),
        "main_peak_pss_mib": statistics.median(r["main_peak"]["pss_mib"] for r in ok),
        "job_peak_rss_mib": med("job_peak_rss_mib"),
        "job_peak_pss_mib": med("job_peak_pss_mib"),
        "dev_shm_peak_mib": med("dev_shm_peak_mib"),
        "dev_shm_fs_peak_mib": med("dev_shm_fs_peak_mib"),
        "ring_mib": med("ring_mib"),
        "worker_peak_file_rss_mib": med("worker_peak_file_rss_mib"),
        "worker_growth_mib": med("worker_growth_mib"),
        "rss_budget_mib": med("rss_budget_mib"),
        "rounds": len(ok), "runs": runs}


def _mib(v):
    return "-" if v is None else f"{v:.0f}"


def print_table(recipe, table, notes, unit, rounds, epochs):
    print(f"\n{recipe}: {unit}/s, medians of epochs 2-{epochs} and of {rounds} round(s)")
    print(f"| variant | {unit}/s | x py-lmdb | worker peak RSS / PSS MiB | main peak RSS / PSS MiB "
          f"| job peak RSS / PSS MiB (its processes summed) | /dev/shm held, peak MiB | batch rings MiB (memfd) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, row in table.items():
        label = VARIANTS[name]
        if "error" in row:
            print(f"| {label} | failed: {row['error']} | | | | | | |")
            continue
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
        print(f"| {label} | {row['items_per_s']:.0f} | {ratio} | {_mib(row['worker_peak_rss_mib'])} / "
              f"{_mib(row['worker_peak_pss_mib'])} | {row['main_peak_rss_mib']:.0f} / "
              f"{row['main_peak_pss_mib']:.0f} | {_mib(row['job_peak_rss_mib'])} / {_mib(row['job_peak_pss_mib'])} | "
              f"{row['dev_shm_peak_mib']:.1f} | {_mib(row['ring_mib'])} |")
    for name, row in table.items():
        if "error" in row or row.get("worker_peak_file_rss_mib") is None:
            continue
        # Each worker's peaks over the run, and what it grew after epoch 1 (persistent workers).
        shown = []
        for run in row["runs"]:
            for w in run.get("worker_peaks", []):
                shown.append(f"{w['rss_mib']:.0f}/{w['pss_mib']:.0f}/{w.get('file_rss_mib', 0):.1f}/"
                             f"{w.get('shmem_mib', 0):.0f}/{w.get('later_rss_mib', 0) - w.get('epoch1_rss_mib', 0):+.1f}")
        budget = "none" if row["rss_budget_mib"] is None else f"{row['rss_budget_mib']:.0f} MiB"
        print(f"- {VARIANTS[name]}: rss_budget {budget}; each worker's peak RSS / PSS / data file's RSS / "
              f"shared memory (rings) MiB / RSS growth after epoch 1: {', '.join(shown)}")
    for name, why in notes.items():
        print(f"- {VARIANTS[name]}: {why}")
    print(flush=True)


def plot(report, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    recipes = list(report["recipes"])
    fig, axes = plt.subplots(2, len(recipes), figsize=(max(7.0, 5.5 * len(recipes)), 8.5), squeeze=False)
    for col, recipe in enumerate(recipes):
        entry = report["recipes"][recipe]
        rows = {k: v for k, v in entry["table"].items() if "error" not in v}
        names = list(rows)
        labels = [VARIANTS[k].replace(" + ", "\n+ ") for k in names]
        x = range(len(names))
        ax = axes[0][col]
        bars = ax.bar(x, [rows[k]["items_per_s"] for k in names], color="tab:blue")
        for bar, k in zip(bars, names):
            r = rows[k]["ratio"]
            ax.annotate("" if r is None else f"{r:.2f}x", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize=8)
        ax.set_title(f"{recipe}: {entry['unit']}/s (x py-lmdb)")
        ax.set_xticks(list(x), labels, fontsize=6)
        ax = axes[1][col]
        series = [("worker peak RSS", "worker_peak_rss_mib"), ("worker peak PSS", "worker_peak_pss_mib"),
                  ("main peak RSS", "main_peak_rss_mib"), ("main peak PSS", "main_peak_pss_mib"),
                  ("job peak RSS (summed)", "job_peak_rss_mib"),
                  ("/dev/shm peak", "dev_shm_peak_mib")]
        w = 0.8 / len(series)
        for j, (label, key) in enumerate(series):
            ax.bar([i + (j - (len(series) - 1) / 2) * w for i in x], [rows[k][key] or 0 for k in names], w,
                   label=label)
        ax.set_title(f"{recipe}: peak memory per process (MiB)")
        ax.set_xticks(list(x), labels, fontsize=6)
        ax.legend(fontsize=7)
    with_dali = any("dali" in e["table"] for e in report["recipes"].values())
    dali = f" (DALI: {report['workers']} threads)" if with_dali else ""
    fig.suptitle(f"{report['workers']} persistent workers{dali}, batch "
                 f"{report['batch']},\nmedians of epochs 2-{report['epochs']} and of {report['repeats']} round(s)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--recipes", default="train,eval,clip,coclr")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--images", type=int, default=None, help="default 2,048 (--demo: 1,024)")
    p.add_argument("--clips", type=int, default=1024)
    p.add_argument("--videos", type=int, default=384,
                   help="videos in the CoCLR-layout corpus (5 in 6 in the train split the coclr recipe reads)")
    p.add_argument("--rss-budget", default="64MiB", help="rss_budget of the coclr recipe's LmdbDataset")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", default=os.path.join(HERE, "out", "image_corpora"),
                   help="where the generated corpora are cached")
    p.add_argument("--out", default=os.path.join(HERE, "out"))
    p.add_argument("--name", default="image_bench", help="the report's file name, without .json / .png")
    p.add_argument("--demo", action="store_true",
                   help="the demo: train recipe, py-lmdb beside the fused path in processes and in threads "
                        "(else variant 2), "
                        "1,024 images, one round; writes image_demo.json and .png")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child_main(args.child)

    if args.images is None:
        args.images = 1024 if args.demo else 2048
    recipes = args.recipes.split(",")
    variants = args.variants.split(",")
    demo_note = None
    if args.demo:
        recipes, args.repeats, args.name = ["train"], 1, "image_demo"
        fused = "fused-loader"
        demo_note = available("train", fused)
        variants = [BASELINE, "lmdb-tv"] if demo_note else [BASELINE, fused, "fused-threads"]
    for r in recipes:
        if r not in RECIPES:
            p.error(f"--recipes: unknown recipe {r!r} ({', '.join(RECIPES)})")
    for v in variants:
        if v not in VARIANTS:
            p.error(f"--variants: unknown variant {v!r} ({', '.join(VARIANTS)})")
    if BASELINE not in variants:
        variants.insert(0, BASELINE)  # the ratios are to it
    if args.epochs < 2 or args.repeats < 1 or args.images < args.batch or args.clips < args.batch:
        p.error("--epochs must be at least 2 (epochs 2+ are reported), --repeats at least 1, "
                "--images and --clips at least --batch")
    os.makedirs(args.out, exist_ok=True)

    import lmdbloader
    import torch
    import image_corpus
    corpora = {}
    for kind in ("images", "lines"):
        if any(RECIPES[r]["corpus"] == kind for r in recipes):
            corpora[kind] = image_corpus.images(args.workdir, args.images, args.seed, kind=kind)
    if any(RECIPES[r]["corpus"] == "clips" for r in recipes):
        corpora["clips"] = image_corpus.clips(args.workdir, args.clips, args.seed)
    if any(RECIPES[r]["corpus"] == "coclr" for r in recipes):
        corpora["coclr"] = image_corpus.coclr(args.workdir, args.videos, args.seed)
    report = {"torch": torch.__version__, "lmdbloader": lmdbloader.__version__, "workers": args.workers,
              "batch": args.batch, "epochs": args.epochs, "repeats": args.repeats, "cpus": os.cpu_count(),
              "rss_budget": args.rss_budget,
              "corpora": {k: {key: v[key] for key in ("root", "count", "mean_bytes", "corpus_bytes")}
                          for k, v in corpora.items()},
              "recipes": {}}
    try:
        import PIL
        report["pillow"] = PIL.__version__
        from torchvision_cpu import import_torchvision
        report["torchvision"] = import_torchvision().__version__
    except ImportError:
        pass
    if have_dali():
        import nvidia.dali
        report["dali"] = nvidia.dali.__version__
    if demo_note:
        print(f"note: {demo_note}: variant 2 ({VARIANTS['lmdb-tv']}) stands in for it", flush=True)

    with tempfile.TemporaryDirectory(dir=args.out) as tmp:
        for recipe in recipes:
            spec = RECIPES[recipe]
            paths = corpora[spec["corpus"]]
            skipped = {v: why for v in variants if (why := available(recipe, v))}
            todo = [v for v in variants if v not in skipped]
            notes = {v: f"skipped: {why}" for v, why in skipped.items()}
            if recipe == "clip" and "dali" in todo:
                notes["dali"] = ("frames read and decoded whole by fn.readers.sequence (CPU; deprecated, DALI's "
                                 "video readers take encoded video), one random_resized_crop box and one flip per "
                                 "clip; no labels")
            if recipe in ("clip-train", *OCR) and "dali" in todo:
                notes["dali"] = ("DALI's own antialiased cubic resize (not PIL's bicubic)" +
                                 (", its gray the JPEG's decoded luma" if recipe in OCR else "") +
                                 ": the same recipe, not the same pixels")
            check = {}
            for kind in ("fused-loader", "fused-pickle"):
                if not any(v == kind or (kind == "fused-loader" and v == "fused-collate") for v in todo):
                    continue
                try:
                    check[kind] = agreement(recipe, paths, kind)
                except Exception as e:  # noqa: BLE001 - reported, the runs still say more
                    check[kind] = {"ok": False, "why": f"{type(e).__name__}: {e}"}
                source = "py-lmdb's pickles, record=pickle.loads" if kind == "fused-pickle" else "the corpus"
                print(f"{recipe}: fused path beside torchvision ({source}): {check[kind]}", flush=True)
                if check[kind].get("why", "").startswith("record "):
                    # Not the same samples (shape, dtype or label): the rates would compare different work.
                    raise SystemExit(f"{recipe}: the fused path's samples differ from torchvision's: "
                                     f"{check[kind]['why']}")
            cost = None
            if "fused-pickle" in todo:
                cost = pickle_cost(paths)
                print(f"{recipe}: pickle.loads {cost['us_per_record']:.1f} us a record "
                      f"({cost['mean_record_bytes'] / 1000:.0f} KB on average)", flush=True)
            runs = {v: [] for v in todo}
            for _ in range(args.repeats):
                for v in todo:
                    warm(paths, v, recipe)
                    res = run_one({"recipe": recipe, "variant": v, "paths": paths, "batch": args.batch,
                                   "workers": args.workers, "epochs": args.epochs, "seed": args.seed,
                                   "rss_budget": args.rss_budget}, tmp)
                    runs[v].append(res)
                    if "error" in res:
                        print(f"{recipe:5s} {VARIANTS[v]:60s} failed: {res['error']}", flush=True)
                        continue
                    workers = ", ".join(f"{w['rss_mib']:.0f}/{w['pss_mib']:.0f}" for w in res["worker_peaks"])
                    print(f"{recipe:5s} {VARIANTS[v]:60s} {res['items_per_s']:6.0f} {spec['unit']}/s  "
                          f"worker RSS/PSS MiB {workers or '-'}  main {res['main_peak']['rss_mib']:.0f}/"
                          f"{res['main_peak']['pss_mib']:.0f}  /dev/shm peak {res['dev_shm_peak_mib']:.1f} MiB "
                          f"(whole filesystem {res['dev_shm_fs_peak_mib']:.1f})",
                          flush=True)
            table = {v: summarize(rs, runs[BASELINE]) for v, rs in runs.items()}
            if cost is not None and "error" not in table["fused-pickle"]:
                # A worker's time per sample at the measured rate, against the callable's share.
                per_item_us = args.workers / table["fused-pickle"]["items_per_s"] * 1e6
                cost["share_of_worker_time"] = cost["us_per_record"] / per_item_us
                notes["fused-pickle"] = (f"pickle.loads costs {cost['us_per_record']:.1f} us a record, "
                                         f"{100 * cost['share_of_worker_time']:.2f}% of a worker's "
                                         f"{per_item_us / 1000:.2f} ms a sample here")
            report["recipes"][recipe] = {"unit": spec["unit"], "table": table, "notes": notes,
                                         "fused_agreement": check, "pickle_loads": cost}
            print_table(recipe, table, notes, spec["unit"], args.repeats, args.epochs)
    if demo_note:
        report["note"] = demo_note
    with open(os.path.join(args.out, args.name + ".json"), "w") as f:
        json.dump(report, f, indent=1)
    plot(report, os.path.join(args.out, args.name + ".png"))
    if args.demo:
        print_demo(report, args)
    print(f"wrote {args.out}/{args.name}.json and .png")
    return 0


def print_demo(report, args):
    """The demo's few lines: each variant's images/s, its workers' RSS, /dev/shm."""
    table = report["recipes"]["train"]["table"]
    print(f"image job: train recipe (RandomResizedCrop 224, flip, normalize) over {args.images} JPEG photographs, "
          f"{args.workers} persistent workers, batch {args.batch}")
    for name, row in table.items():
        if "error" in row:
            print(f"  {VARIANTS[name]}: failed: {row['error']}")
            continue
        run = row["runs"][-1]
        workers = ", ".join(f"{w['rss_mib']:.0f}" for w in run["worker_peaks"])
        workers = f"worker peak RSS {workers} MiB" if workers else "no worker process (threads)"
        ring = f", batch rings {row['ring_mib']:.0f} MiB (memfd)" if row["ring_mib"] else ""
        print(f"  {VARIANTS[name]}: {row['items_per_s']:.0f} images/s ({row['ratio']:.2f}x), job peak RSS / PSS "
              f"{_mib(row['job_peak_rss_mib'])} / {_mib(row['job_peak_pss_mib'])} MiB (all its processes), "
              f"{workers}, /dev/shm peak {row['dev_shm_peak_mib']:.1f} MiB{ring}")
    if report.get("note"):
        print(f"  note: {report['note']}: variant 2 stands in for it")


if __name__ == "__main__":
    sys.exit(main())
